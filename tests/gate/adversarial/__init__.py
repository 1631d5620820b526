"""The standing adversarial suite: each probe of the served gate's review as a fast, bounded, loopback-only test.

The ten that broke, and where each is kept:

1. recovery adopting another request's decision — ``tests/gate/adversarial/test_recovery.py``;
2. colliding decision keys (a missing id vs ``"\\x00"``; pandas < 3) — ``tests/gate/test_decision_keys.py``,
   ``tests/pipeline/test_sources.py`` (``content_hash``);
3. the webhook receiver working for strangers — ``tests/flows/adversarial/test_webhook_receiver.py``;
4. one alert sent several times — ``tests/gate/adversarial/test_alert_once.py``;
5. files outside the drop folder read and disclosed — ``tests/gate/adversarial/test_roots.py``;
6. a duplicate YAML key loosening a gate, 9. batch ids colliding by name —
   ``tests/gate/adversarial/test_config_and_ids.py`` (and ``tests/pipeline/test_config.py``);
7. log forging — ``tests/gate/adversarial/test_log_lines.py``;
8. an owed event lost while Prefect is down — ``tests/flows/adversarial/test_events_outbox.py``;
10. a decompression bomb — ``tests/pipeline/adversarial/test_input_bombs.py``.

Probes that held are kept where their feature is tested: malformed CSV / Parquet, YAML alias bombs, oversized
configurations, non-finite numbers and every other bound (``tests/pipeline/test_limits.py``); bound SQL parameters
(``tests/gate/test_sql_source.py``, ``tests/gate/test_row_selection.py``); secrets never printed
(``tests/pipeline/test_alerts.py``); ``kill -9`` of ``gate`` and ``serve`` and many processes at once
(``tests/gate/test_concurrency.py``, ``tests/gate/test_drop_folder.py``).
"""
