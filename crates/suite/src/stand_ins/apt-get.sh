#!/bin/bash
# tack's stand-in for apt-get. The task's scripts were written for a
# container where they run as root with network; here they run unprivileged
# and offline, so packages come from the host: `install` succeeds when the
# host has them all and names the missing ones otherwise.
command=""
packages=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-t|-c) shift 2 ;;
    -*) shift ;;
    *)
      if [ -z "$command" ]; then command=$1; else packages+=("${1%%=*}"); fi
      shift ;;
  esac
done
case "$command" in
  update|upgrade|dist-upgrade|clean|autoclean|autoremove)
    echo "tack: apt-get $command: nothing to do, packages come from the host"
    exit 0 ;;
  install)
    missing=()
    for package in "${packages[@]}"; do
      dpkg-query -W -f='${db:Status-Abbrev}' "$package" 2>/dev/null | grep -q '^ii' \
        || missing+=("$package")
    done
    if [ ${#missing[@]} -eq 0 ]; then
      echo "tack: apt-get install ${packages[*]}: provided by the host"
      exit 0
    fi
    echo "tack: apt-get install: this host lacks ${missing[*]}; add them to the task's [environment] debian and install them on the host" >&2
    exit 100 ;;
  *)
    echo "tack: apt-get ${command:-(no command)} is not available: packages come from the host" >&2
    exit 100 ;;
esac
