"""Label Studio as a source of judgements: a project on a server, or a JSON export file, as the long table.

* :mod:`.labeling_config` — the labeling config (XML) as questions: one per ``Choices`` / ``Rating`` / ``Number`` /
  ``Taxonomy`` / ``Labels`` / ``RectangleLabels`` control, level (a multi-select one: ``set``) or kind (``spans``,
  ``boxes``) and category order from the config.
* :mod:`.regions` — the spans of a ``Labels`` control and the boxes of a ``RectangleLabels`` control as rows.
* :mod:`.client` — the REST client (legacy or personal access token from the environment; tasks paged; errors name
  the server and the request).
* :mod:`.reader` — :func:`read_label_studio` (the whole table) and :func:`iter_annotations` (one page at a time, with
  an ``updated_after`` watermark: the monitor's reading), of one control or several.
* :mod:`.selection` — a :class:`Selection` of tasks, a view or a time range, and the one a project URL's query asks
  for.
* :mod:`.source` — the gate's ``format: label_studio`` batch source (one or several controls), its questions'
  controls and categories, and the id of the batch it selects.
"""

from labelgate.pipeline.sources.label_studio.client import DEFAULT_TOKEN_ENV, PAGE_SIZE, LabelStudioClient
from labelgate.pipeline.sources.label_studio.labeling_config import Control, controls, parse_control
from labelgate.pipeline.sources.label_studio.reader import GROUND_TRUTH, iter_annotations, read_label_studio
from labelgate.pipeline.sources.label_studio.selection import Selection, selection_of_url
from labelgate.pipeline.sources.label_studio.source import (
    batch_id_of,
    event_project_url,
    gate_categories,
    load_label_studio,
    project_url,
    source_selection,
    with_control_levels,
)

__all__ = ["DEFAULT_TOKEN_ENV", "GROUND_TRUTH", "PAGE_SIZE", "Control", "LabelStudioClient", "Selection",
           "batch_id_of", "controls", "event_project_url", "gate_categories", "iter_annotations",
           "load_label_studio", "parse_control", "project_url", "read_label_studio", "selection_of_url",
           "source_selection", "with_control_levels"]
