#!/usr/bin/env bash
# Serve a class in one command: K streamlit replicas and nginx in front (deploy/serve.py; --help for the options).
#   deploy/serve.sh                 # one replica per core (at most 8), the class opens http://THIS-HOST:8501/
#   deploy/serve.sh --replicas 4 --port 8080 --model assets/models/en-fr
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
  else
    echo "nginx is missing: apt-get install nginx (as root)" >&2
    exit 1
  fi
fi
python=.venv/bin/python
[ -x "$python" ] || python=python3
exec "$python" deploy/serve.py "$@"
