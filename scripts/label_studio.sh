#!/usr/bin/env bash
# A throw-away Label Studio server for the LabelGate tests, on 127.0.0.1, for one CI run or one developer session.
#
#   scripts/label_studio.sh start    install label-studio==1.23.2 into its own virtualenv if missing (its pins clash
#                                    with LabelGate's: never into .venv), start it on a free port with SQLite and
#                                    media under a temporary directory and a known user, password and legacy token,
#                                    wait for /health, and print on stdout:
#                                      export LABELGATE_TEST_LS_URL=http://127.0.0.1:PORT
#                                      export LABELGATE_TEST_LS_USER=<email>
#                                      export LABELGATE_TEST_LS_PASSWORD=<password>
#                                      export LABELGATE_TEST_LS_TOKEN=<legacy token>
#                                      export LABELGATE_TEST_LS_DIR=<temporary directory>
#                                    so that `eval "$(scripts/label_studio.sh start)"` configures the tests.
#   scripts/label_studio.sh install  only install the virtualenv (CI can cache it between runs).
#   scripts/label_studio.sh stop [DIR]
#                                    stop the server started above (DIR defaults to $LABELGATE_TEST_LS_DIR) by the
#                                    process id it recorded, and delete its directory.
#
# The virtualenv is $LABELGATE_LS_VENV, default $HOME/.cache/labelgate/label-studio-venv; the Python that creates it
# is $LABELGATE_LS_PYTHON (default python3.11, else python3). Progress and errors go to stderr; the exit status is
# non-zero when the server could not be installed or started (the Label Studio tests then skip, naming
# LABELGATE_TEST_LS_URL). The legacy token is disabled by Label Studio until an organisation enables it: the tests
# enable it through a logged-in session (docs/deployment.md, "Using LabelGate with Label Studio").
set -euo pipefail

VERSION=1.23.2
VENV=${LABELGATE_LS_VENV:-$HOME/.cache/labelgate/label-studio-venv}
USER_EMAIL=labelgate@example.com
PASSWORD=labelgate-test-password
TOKEN=labelgatetesttoken0123456789abcdef01234567

log() { echo "label_studio: $*" >&2; }

install_ls() {
  if [ -x "$VENV/bin/label-studio" ] && "$VENV/bin/python" -c "import label_studio" 2>/dev/null; then return 0; fi
  local python=${LABELGATE_LS_PYTHON:-}
  if [ -z "$python" ]; then python=$(command -v python3.11 || command -v python3); fi
  log "installing label-studio==$VERSION into $VENV (a few minutes)"
  mkdir -p "$(dirname "$VENV")"
  "$python" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "label-studio==$VERSION" >&2
}

free_port() {
  # A port the kernel just handed out and released (the server binds it right after).
  "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_ls() {
  install_ls
  local dir port url i
  dir=$(mktemp -d "${TMPDIR:-/tmp}/labelgate-ls.XXXXXX")
  port=$(free_port)
  url="http://127.0.0.1:$port"
  log "starting Label Studio $VERSION on $url (data in $dir)"
  # setsid: the server and its workers form one process group, stopped together by `stop`.
  # SSRF protection off: the tests' webhook receiver listens on 127.0.0.1, an address Label Studio refuses by default.
  LABEL_STUDIO_BASE_DATA_DIR="$dir" DJANGO_DB=sqlite LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK=false \
    SSRF_PROTECTION_ENABLED=false \
    setsid "$VENV/bin/label-studio" start --no-browser --host 127.0.0.1 --port "$port" \
    --username "$USER_EMAIL" --password "$PASSWORD" --user-token "$TOKEN" >"$dir/server.log" 2>&1 &
  echo $! >"$dir/server.pid"
  for i in $(seq 1 180); do
    if curl -fsS -o /dev/null "$url/health" 2>/dev/null; then break; fi
    if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then tail -n 30 "$dir/server.log" >&2; return 1; fi
    sleep 1
  done
  curl -fsS -o /dev/null "$url/health" || { log "no healthy server within 180 s"; tail -n 30 "$dir/server.log" >&2; return 1; }
  log "Label Studio listening on $url; stop it with: $0 stop $dir"
  echo "export LABELGATE_TEST_LS_URL=$url"
  echo "export LABELGATE_TEST_LS_USER=$USER_EMAIL"
  echo "export LABELGATE_TEST_LS_PASSWORD=$PASSWORD"
  echo "export LABELGATE_TEST_LS_TOKEN=$TOKEN"
  echo "export LABELGATE_TEST_LS_DIR=$dir"
}

stop_ls() {
  local dir=${1:-${LABELGATE_TEST_LS_DIR:-}} pid
  [ -n "$dir" ] && [ -f "$dir/server.pid" ] || { log "no server directory given"; return 1; }
  pid=$(cat "$dir/server.pid")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -rf "$dir"
  log "stopped the server of $dir"
}

case "${1:-}" in
  start) start_ls ;;
  install) install_ls ;;
  stop) stop_ls "${2:-}" ;;
  *) echo "usage: $0 start | install | stop [DIR]" >&2; exit 2 ;;
esac
