#!/bin/sh
# Runs the Python package's tests with the first python3 that has cffi,
# pytest and pytest-asyncio (Debian's /usr/bin/python3 first: a python3
# earlier on PATH may lack Debian's packages). Exit 77 (CTest's skip) when
# none has them. Usage: run.sh PYTHON_DIR [pytest args, default: tests]
set -u
dir=$1
shift
for py in ${VIGIL_PYTHON:-} /usr/bin/python3 python3; do
    if "$py" -c 'import cffi, pytest, pytest_asyncio' 2>/dev/null; then
        cd "$dir" || exit 1
        [ $# -gt 0 ] || set -- tests
        exec "$py" -m pytest -q -p no:cacheprovider -rs "$@"
    fi
done
echo "python: no python3 with cffi, pytest and pytest-asyncio (apt-get install python3-cffi python3-pytest python3-pytest-asyncio): skipped"
exit 77
