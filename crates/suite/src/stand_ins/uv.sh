#!/bin/bash
# tack's stand-in for uv and uvx: runs tools from the task's Python
# environment, provisioned before the run (offline from then on), instead of
# resolving and downloading them. `--with` packages must be ones the
# environment has; a Python version other than its own is noted.
venv=@VENV@
provisioned=" @PACKAGES@ "
python_version=@PYTHON_VERSION@

package_name() {
  local name=${1%%[=<>!~ @\[;]*}
  echo "${name,,}" | tr '_.' '--'
}

require() {
  local name
  name=$(package_name "$1")
  case "$provisioned" in
    *" $name "*) ;;
    *)
      echo "tack: $1 is not in this task's Python environment; add it to the task's [environment] python" >&2
      exit 2 ;;
  esac
}

ask_python() {
  case "$1" in
    "$python_version"|"$python_version".*|python"$python_version"|python3|python|3) ;;
    *) echo "tack: asked for Python $1; the task environment has Python $python_version (the host's)" >&2 ;;
  esac
}

run_tool() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --with|-w|--from) require "$2"; shift 2 ;;
      --with=*) require "${1#--with=}"; shift ;;
      --from=*) require "${1#--from=}"; shift ;;
      -p|--python) ask_python "$2"; shift 2 ;;
      --python=*) ask_python "${1#--python=}"; shift ;;
      -q|--quiet|-v|--verbose|--offline|--no-cache|-n|--isolated|--no-project|--frozen|--locked) shift ;;
      --) shift; break ;;
      -*) echo "tack: the uv stand-in does not know the option $1" >&2; exit 2 ;;
      *) break ;;
    esac
  done
  if [ $# -eq 0 ]; then
    echo "tack: no command given" >&2
    exit 2
  fi
  local tool=${1%%[@=]*}
  shift
  if [ -x "$venv/bin/$tool" ]; then
    exec "$venv/bin/$tool" "$@"
  fi
  case "$tool" in
    */*) exec "$tool" "$@" ;;
  esac
  if command -v "$tool" >/dev/null 2>&1; then
    exec "$tool" "$@"
  fi
  echo "tack: $tool is not in this task's Python environment; add its package to the task's [environment] python" >&2
  exit 127
}

if [ "$(basename "$0")" = uvx ]; then
  run_tool "$@"
fi
case "$1" in
  run|tool)
    if [ "$1" = tool ]; then shift; fi
    shift
    run_tool "$@" ;;
  pip)
    if [ "$2" != install ]; then exec "$venv/bin/python" -m pip "${@:2}"; fi
    shift 2
    for arg in "$@"; do
      case "$arg" in -*) ;; *) require "$arg" ;; esac
    done
    echo "tack: already in the task's Python environment: $*"
    exit 0 ;;
  --version|-V|version)
    echo "uv (tack stand-in; Python $python_version)"
    exit 0 ;;
  *)
    echo "tack: the uv stand-in runs tools (uv run, uvx, uv pip install of provisioned packages); \`uv $1\` is not available" >&2
    exit 2 ;;
esac
