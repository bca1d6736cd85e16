# vgpu shell: scripts from stdin and files, -k, -c, quoting, exit statuses; and the interactive
# console under tmux: prompt, completion, history across restarts, Ctrl-C, errors.
. "$(dirname "$0")/lib.sh"

run vgpu shell <<'S'
# a comment, then a blank line

list --json
S
assert_rc "script of good commands exits 0" 0
assert_contains "script ran list --json" '"gpus"' "$out"

run vgpu shell <<'S'
list --bogus
list
S
assert_rc "script stops at the first failure with its status" 2
assert_not_contains "nothing after the failure ran" "NVIDIA H100" "$out"
assert_contains "the failing line is named" "stdin:1: 'list --bogus' failed with status 2" "$err"

run vgpu shell -k <<'S'
list --bogus
list --gpu 0
S
assert_rc "-k goes on and exits with the last status" 0
assert_contains "-k ran the line after the failure" "NVIDIA H100" "$out"

printf 'vgpu list --gpu "0"\nlist --gpu '"'"'GPU-4f'"'"'\n' > "$T_DIR/script"
run vgpu shell "$T_DIR/script"
assert_rc "script file with quotes and a vgpu prefix runs" 0

run vgpu shell -c 'list --gpu 7'
assert_rc "-c returns the command's status" 2
assert_contains "-c shows the command's error" "there is no GPU 7" "$err"

run vgpu shell -c 'list "unterminated'
assert_rc "an unterminated quote is a usage error" 2
assert_contains "an unterminated quote is named" "unterminated quote" "$err"
run vgpu shell -c 'list \'
assert_rc "a trailing backslash is a usage error, not an empty last word" 2
assert_contains "... named" "ends with a backslash" "$err"
run vgpu shell -c 'list --json a\\'
assert_contains "an escaped backslash is a word's last character" "unexpected argument 'a\\'" "$err"

run vgpu shell <<'S'
nosuch
S
assert_rc "unknown command in a script exits 2" 2

printf 'exit 3\nlist\n' > "$T_DIR/exit3"
run vgpu shell "$T_DIR/exit3"
assert_rc "exit N ends the script with N" 3

# --- interactive, under tmux -------------------------------------------------------------
if ! command -v tmux >/dev/null; then
  skip "interactive shell" "tmux is not installed"
  done_testing; exit 0
fi
export XDG_STATE_HOME=$T_DIR/xdg
sock=$T_DIR/tmux.sock
tm() { tmux -S "$sock" "$@"; }
screen() { tm capture-pane -p -t vg; }
on_screen() { screen | grep -qF -- "$1"; }
# TEXT was typed and the shell is back at an empty prompt (the last line shown).
done_with() { on_screen "$1" && screen | sed '/^ *$/d' | tail -n 1 | grep -q ']> *$'; }
start_shell() {
  tm -f /dev/null new-session -d -s vg -x 120 -y 30 \
    "env PATH='$PATH' LD_LIBRARY_PATH='$LD_LIBRARY_PATH' VGPU_STATE_DIR='$VGPU_STATE_DIR' VGPU_FAKE_STATE='$VGPU_FAKE_STATE' VGPU_FAKE_SCENARIO='$VGPU_FAKE_SCENARIO' XDG_STATE_HOME='$XDG_STATE_HOME' ${LD_PRELOAD:+LD_PRELOAD='$LD_PRELOAD'} ${ASAN_OPTIONS:+ASAN_OPTIONS='$ASAN_OPTIONS'} vgpu shell; echo SHELL-EXITED-\$?; sleep 30"
}
start_shell
if poll_until 20 on_screen "GPU, 0 jobs]>"; then ok "prompt shows host, GPUs and jobs"; else not_ok "prompt shows host, GPUs and jobs" "$(screen)"; fi
assert_match "prompt names the host" "vgpu@$(hostname | cut -c1-20)" "$(screen)"
# An ended job (kept a while for vgpu wait) is not counted, as vgpu top does not count it.
tm send-keys -t vg 'run -- true' Enter
wait_until 20 done_with 'run -- true'
last=$(screen | grep ']> *$' | tail -n 1)
assert_contains "prompt after a job ended: still 0 jobs" "0 jobs]>" "$last"

tm send-keys -t vg 'lis' Tab
completed() { screen | grep -q ']> list *$'; }
wait_until 20 completed
tm send-keys -t vg ' --js' Tab Enter
if poll_until 20 on_screen '"gpus"'; then ok "Tab completes a command and an option"; else not_ok "Tab completes a command and an option" "$(screen)"; fi

tm send-keys -t vg 'list --gpu 9' Enter
if poll_until 20 on_screen "there is no GPU 9"; then ok "a failing command prints its error"; else not_ok "a failing command prints its error" "$(screen)"; fi
tm send-keys -t vg 'help list' Enter
if poll_until 20 on_screen "man vgpu-list"; then ok "the shell goes on after an error; help CMD works"; else not_ok "help after an error" "$(screen)"; fi

tm send-keys -t vg 'shell -c "completion --complete 1 vgpu"' Enter
wait_until 20 done_with 'completion --complete 1 vgpu'
# Ctrl-C erases the line and shows a new empty prompt: count them, scrollback included.
empty_prompts() { tm capture-pane -p -S - -t vg | grep -c ']> *$'; }
more_prompts() { [ "$(empty_prompts)" -gt "$1" ]; }
tm send-keys -t vg 'half typed line'
wait_until 20 on_screen 'half typed line'
n=$(empty_prompts)
tm send-keys -t vg C-c
wait_until 20 more_prompts "$n"
tm send-keys -t vg 'list --gpu 0' Enter
if poll_until 20 on_screen "81559 MiB"; then ok "Ctrl-C at the prompt abandons the line, the shell goes on"; else not_ok "Ctrl-C at the prompt" "$(screen)"; fi

tm send-keys -t vg 'exit' Enter
if poll_until 20 on_screen "SHELL-EXITED-0"; then ok "exit leaves with status 0"; else not_ok "exit leaves with status 0" "$(screen)"; fi
tm kill-session -t vg 2>/dev/null
hist=$XDG_STATE_HOME/vgpu/history
if [ -f "$hist" ] && grep -qx 'list --gpu 0' "$hist"; then ok "history is written"; else not_ok "history is written" "$(cat "$hist" 2>/dev/null)"; fi
assert_eq "history file is 0600" "600" "$(stat -c %a "$hist" 2>/dev/null)"

start_shell
wait_until 20 on_screen "]>"
tm send-keys -t vg Up
# A fresh shell shows only its banner and prompt: "]> exit" there can only be the recalled line.
if poll_until 20 on_screen ']> exit'; then ok "history survives a restart (Up recalls the last line)"; else not_ok "history survives a restart" "$(screen)"; fi
tm send-keys -t vg C-u C-d
if poll_until 20 on_screen "SHELL-EXITED-0"; then ok "Ctrl-D leaves"; else not_ok "Ctrl-D leaves" "$(screen)"; fi
tm kill-server 2>/dev/null
done_testing
