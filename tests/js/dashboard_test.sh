#!/usr/bin/env bash
# End-to-end test of the `hinge serve` dashboard (GET /) in Debian's headless chromium.
#
# Usage: tests/js/dashboard_test.sh BUILD_DIR HINGE_BINARY SHARED_DIR
#
# Starts `hinge serve` on a free port with stories260K, sends two identical completions (so the
# prefix cache has hits), keeps a little concurrent load going in the background, then loads the
# dashboard in headless chromium twice: --dump-dom (asserts that live numbers were rendered:
# body data-ready="1", digits in the tiles, a non-zero prefix hit rate, no error text) and
# --screenshot (saved as BUILD_DIR/dashboard.png, checked to be a non-trivial 1280x900 PNG).
# Finally SIGTERM must stop the server with exit code 0. All traffic goes to 127.0.0.1.
# Fails when chromium or curl is missing (scripts/install-deps installs both). Bounded: about 10 s, hard limit ~50 s.
set -uo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 BUILD_DIR HINGE_BINARY SHARED_DIR" >&2
  exit 2
fi
build_dir=$1
hinge=$2
shared=$3
model=$shared/models/stories260K.gguf
png=$build_dir/dashboard.png

chromium_bin=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium_bin" ] || ! command -v curl >/dev/null; then
  echo "FAIL: needs chromium and curl (scripts/install-deps installs them)" >&2
  exit 1
fi
[ -x "$hinge" ] || { echo "FAIL: $hinge is not executable" >&2; exit 1; }
[ -f "$model" ] || { echo "FAIL: missing model $model" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hinge-dashboard.XXXXXX")
server_pid=
load_pid=
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in server.err chromium-dom.err chromium-shot.err; do
    if [ -s "$tmp/$f" ]; then echo "--- $f (tail)" >&2; tail -n 20 "$tmp/$f" >&2; fi
  done
  exit 1
}

# --- server ---------------------------------------------------------------------------------
"$hinge" serve -m "$model" --port 0 --host 127.0.0.1 -t 1 -q >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
port=
for _ in $(seq 1 200); do  # up to 20 s
  port=$(sed -n 's|^hinge: serving .* on http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$tmp/server.out")
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || fail "hinge serve exited before it was ready"
  sleep 0.1
done
[ -n "$port" ] || fail "hinge serve did not print its 'serving' line within 20 s"
base=http://127.0.0.1:$port
echo "server ready on $base"

curl_opts=(--silent --show-error --fail --max-time 20 --noproxy '*')
[ "$(curl "${curl_opts[@]}" -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] ||
  fail "GET /health is not 200"

# --- load -------------------------------------------------------------------------------------
# The prompt is longer than one KV block (16 tokens), so the second identical request reuses the
# first one's cached prompt block: the hit rate on the dashboard must be above zero.
prompt='Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends every day.'
body="{\"prompt\":\"$prompt\",\"max_tokens\":200,\"temperature\":0}"
complete() {
  curl "${curl_opts[@]}" -H 'Content-Type: application/json' -d "$body" "$base/v1/completions"
}
for i in 1 2; do
  out=$(complete) || fail "POST /v1/completions #$i failed"
  case $out in *'"text_completion"'*) ;; *) fail "unexpected completion response: $out" ;; esac
done

# Background load while the browser looks: a few concurrent requests at a time, until
# $tmp/stop appears (at most ~15 s).
(
  end=$((SECONDS + 15))
  while [ $SECONDS -lt $end ] && [ ! -e "$tmp/stop" ]; do
    for _ in 1 2 3; do complete >/dev/null 2>&1 & done
    wait
    sleep 0.05
  done
) &
load_pid=$!
# The charts draw from /v1/stats "history", one point per 2 s: let a couple accumulate.
sleep 2.5

# --- browser ----------------------------------------------------------------------------------
# Each call gets its own profile; virtual time lets the page's 1 s poll run a few times.
chromium() {
  local profile
  profile=$(mktemp -d "$tmp/profile.XXXXXX")
  HOME=$profile XDG_CONFIG_HOME=$profile XDG_CACHE_HOME=$profile \
    timeout 30 "$chromium_bin" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --user-data-dir="$profile" --no-first-run --no-default-browser-check --disable-extensions \
    --disable-background-networking --disable-sync --disable-component-update --mute-audio \
    --hide-scrollbars --window-size=1280,900 --virtual-time-budget=4000 "$@" "$base/"
}

chromium --dump-dom >"$tmp/dom.html" 2>"$tmp/chromium-dom.err" || fail "chromium --dump-dom failed"
dom=$(cat "$tmp/dom.html")

# The text content of the element with id=$1 (the tiles are <b id=...>text</b>).
text_of() {
  printf '%s' "$dom" | tr -d '\n' | sed -n "s|.*id=\"$1\"[^>]*>\([^<]*\)<.*|\1|p"
}
printf '%s' "$dom" | grep -q '<body[^>]*data-ready="1"' ||
  fail "body has no data-ready=\"1\": the page never rendered /v1/stats"
for id in running waiting kvuse hit toks ttft itl rej; do
  v=$(text_of "$id")
  echo "  #$id = '$v'"
  case $v in
    *[0-9]*) ;;
    *) fail "#$id shows '$v', not a number" ;;
  esac
  case $v in *–*) fail "#$id still shows the placeholder: '$v'" ;; esac
done
[[ $(text_of kvuse) =~ ^[0-9]+\ /\ [1-9][0-9]*$ ]] || fail "#kvuse is not 'used / total': '$(text_of kvuse)'"
[[ $(text_of hit) =~ ^[0-9]+\.[0-9]\ %$ ]] || fail "#hit is not a percentage: '$(text_of hit)'"
[ "$(text_of hit)" != "0.0 %" ] || fail "#hit is 0.0 % after two identical requests"
[[ $(text_of rej) =~ ^([0-9]+)\ /\ [0-9]+\ /\ [0-9]+$ ]] && [ "${BASH_REMATCH[1]}" -ge 2 ] ||
  fail "#rej should count at least 2 accepted requests: '$(text_of rej)'"
[ "$(text_of model)" = "stories260K" ] || fail "#model is '$(text_of model)', not stories260K"
[ -z "$(text_of err)" ] || fail "the page shows an error: '$(text_of err)'"
case $(text_of kvinfo) in *"blocks of 16 tokens"*) ;; *) fail "#kvinfo: '$(text_of kvinfo)'" ;; esac

rm -f "$png"
chromium --screenshot="$png" >/dev/null 2>"$tmp/chromium-shot.err" || fail "chromium --screenshot failed"
[ -f "$png" ] || fail "no screenshot at $png"
size=$(stat -c %s "$png")
# PNG signature, then the IHDR chunk: width and height as 4-byte big-endian at offsets 16 and 20.
sig=$(od -An -tx1 -N8 "$png" | tr -d ' \n')
[ "$sig" = 89504e470d0a1a0a ] || fail "$png is not a PNG (signature $sig)"
width=$((16#$(od -An -tx1 -j16 -N4 "$png" | tr -d ' \n')))
height=$((16#$(od -An -tx1 -j20 -N4 "$png" | tr -d ' \n')))
[ "$width" = 1280 ] && [ "$height" = 900 ] || fail "screenshot is ${width}x${height}, expected 1280x900"
# A blank or single-colour 1280x900 page compresses to a few KB; the rendered dashboard (text,
# tiles, block map, two charts) is tens of KB.
[ "$size" -gt 20000 ] || fail "screenshot is only $size bytes: the page looks blank"
echo "screenshot: $png (${width}x${height}, $size bytes)"

# --- shutdown ---------------------------------------------------------------------------------
touch "$tmp/stop"
wait "$load_pid" 2>/dev/null
load_pid=
kill -TERM "$server_pid"
# A watchdog: SIGKILL (exit 137) if the server is still there 15 s after SIGTERM.
# (Short sleeps, so that nothing lingers holding our stdout once it is killed.)
(for _ in $(seq 1 150); do sleep 0.1; done; kill -KILL "$server_pid") >/dev/null 2>&1 &
watchdog_pid=$!
wait "$server_pid"
rc=$?
kill "$watchdog_pid" 2>/dev/null
wait "$watchdog_pid" 2>/dev/null
server_pid=
[ "$rc" != 137 ] || fail "hinge serve still running 15 s after SIGTERM"
[ "$rc" = 0 ] || fail "hinge serve exited with $rc after SIGTERM, expected 0"
grep -q 'hinge: stopped:' "$tmp/server.err" || fail "no 'hinge: stopped:' line on stderr"
echo "PASS"
