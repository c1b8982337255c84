#!/bin/bash
# tack's stand-in for curl and wget: the uv installer (astral.sh/uv) is not
# fetched, since uv and uvx here are tack's stand-ins running tools from the
# task's provisioned Python environment; the script it answers with writes
# the installer's `env` file. Anything else goes to the host's own program.
for arg in "$@"; do
  case "$arg" in
    https://astral.sh/uv*|http://astral.sh/uv*|astral.sh/uv*)
      # The installer's `env` file, which scripts source next
      # (`source $HOME/.local/bin/env`): uv is already on PATH here.
      cat <<'SCRIPT'
mkdir -p "$HOME/.local/bin"
echo '# tack: uv is provided by the task environment, already on PATH' > "$HOME/.local/bin/env"
echo 'tack: uv is provided by the task environment; the installer did not run' >&2
SCRIPT
      exit 0 ;;
  esac
done
