#!/usr/bin/env bash
# Read-only checks of vgpu mig on a real GPU, compared with nvidia-smi. Never changes a setting:
# only status, profiles, list and export run here.
#   tests/gpu/mig.sh [BUILD_DIR]
. "$(dirname "$0")/tap.sh"
for verb in status profiles list export; do
  out=$("$V" mig $verb 2>&1); rc=$?
  [ $rc = 0 ] && ok "vgpu mig $verb" || not_ok "vgpu mig $verb (rc $rc)" "$out"
done
js=$("$V" mig status --json) && ok "status --json" || not_ok "status --json"
for g in $(jq -r '.gpus[] | select(.mig_supported) | .index' <<<"$js"); do
  cur=$(nvidia-smi -i "$g" --query-gpu=mig.mode.current --format=csv,noheader | tr 'A-Z' 'a-z' | tr -d ' ')
  mine=$(jq -r ".gpus[] | select(.index==$g) | .mig_mode_current" <<<"$js")
  [ "$cur" = "$mine" ] && ok "GPU $g: MIG mode $mine as nvidia-smi" || not_ok "GPU $g: MIG mode" "nvidia-smi $cur, vgpu $mine"
  # nvidia-smi mig -lgip: "|   0  MIG 1g.10gb  19  7/7  9.75  No  16  1  0 |" (first line of each profile)
  smi=$(nvidia-smi mig -i "$g" -lgip 2>/dev/null | sed -n 's/^|  *[0-9]*  *MIG \([^ ]*\)  *\([0-9]*\)  *\([0-9]*\/[0-9]*\)  *\([0-9.]*\)  *[A-Za-z]*  *\([0-9]*\) .*/\1 \2 \4 \5/p' | sort)
  ours=$("$V" mig profiles --gpu "$g" --json | jq -r '.gpus[0].profiles[] | "\(.name) \(.id) \(.mem_total_bytes / 1048576) \(.sm_count)"' |
    awk '{ printf "%s %s %.2f %s\n", $1, $2, $3 / 1024, $4 }' | sort)
  if [ -z "$smi" ]; then
    ok "GPU $g: profiles vs nvidia-smi mig -lgip # SKIP nvidia-smi lists no profiles (MIG off on this driver)"
  else
    [ "$smi" = "$ours" ] && ok "GPU $g: profiles (name, ID, GiB, SMs) match nvidia-smi mig -lgip" \
      || not_ok "GPU $g: profiles match nvidia-smi mig -lgip" "nvidia-smi:"$'\n'"$smi"$'\n'"vgpu:"$'\n'"$ours"
  fi
done
echo "# $n tests, $fail failed"
[ $fail = 0 ]
