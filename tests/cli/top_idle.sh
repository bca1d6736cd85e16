# vgpu top's screen sleeps between refreshes: it waits in poll(2) for a key or the sampler's
# next sample, instead of looking every 50 ms (20 wake-ups a second with nothing to do, most of
# the screen's own CPU at -d 1). Keys still act at once, and a resize still redraws.
. "$(dirname "$0")/lib.sh"

if ! command -v tmux >/dev/null; then skip_all "screen tests: tmux is not installed"; fi
SOCK=vgpu-top-idle-$$
export LANG=C.UTF-8 LC_ALL=C.UTF-8 HOME=$T_DIR
tm() { tmux -L "$SOCK" "$@"; }
idle_cleanup() { tm kill-server 2>/dev/null; t_cleanup; }
trap idle_cleanup EXIT
pane() { tm capture-pane -p -t t 2>/dev/null; }
on_pane() { pane | grep -qF -- "$1"; }

tm new-session -d -s t -x 120 -y 40 "exec vgpu top -d 2"
wait_until 10 on_pane "vgpu top - "
top=$(tm display -p -t t '#{pane_pid}')
assert_eq "the pane runs vgpu top" "vgpu" "$(cat "/proc/$top/comm" 2>/dev/null)"
# The screen's thread is the main one; the sampler is another.
switches() { awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$top/task/$top/status"; }
a=$(switches)
sleep 3                                 # the measured window: 3 s of a screen left alone
b=$(switches)
n=$((b - a))
if [ "$n" -le 12 ]; then ok "left alone for 3 s at -d 2, the screen woke $n times (it looked 60 times)"
else not_ok "left alone for 3 s at -d 2, the screen woke $n times (it looked 60 times)"; fi
tm send-keys -t t h
if poll_until 5 on_pane "vgpu top - keys"; then ok "a key still acts at once"; else not_ok "a key still acts at once" "$(pane)"; fi
tm send-keys -t t x
tm resize-window -t t -x 80 -y 24 2>/dev/null || tm resize-pane -t t -x 80 -y 24
narrow() { [ "$(pane | awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')" -le 80 ] && on_pane "vgpu top - "; }
if poll_until 5 narrow; then ok "a resize still redraws"; else not_ok "a resize still redraws" "$(pane)"; fi
tm send-keys -t t q
no_session() { ! tm has-session -t t 2>/dev/null; }
if poll_until 5 no_session; then ok "q quits"; else not_ok "q quits"; fi
done_testing
