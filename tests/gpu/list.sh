#!/usr/bin/env bash
# vgpu list on a real GPU, field by field against nvidia-smi --query-gpu (issue 2: "vgpu list has
# been compared with nvidia-smi"). Read-only.
#   tests/gpu/list.sh [BUILD_DIR]
. "$(dirname "$0")/tap.sh"
js=$("$V" list --json) && ok "vgpu list --json exits 0" || { not_ok "vgpu list --json" "$js"; exit 1; }
jq -e . >/dev/null <<<"$js" && ok "vgpu list --json is valid JSON" || not_ok "vgpu list --json is valid JSON" "$js"
"$V" list >/dev/null && ok "vgpu list exits 0" || not_ok "vgpu list exits 0"
lower() { tr 'A-Z' 'a-z' | tr '_' '-' | tr -d ' '; }
drv=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
[ "$(jq -r .driver_version <<<"$js")" = "$drv" ] && ok "driver version $drv" \
  || not_ok "driver version" "nvidia-smi $drv, vgpu $(jq -r .driver_version <<<"$js")"
cuda=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
[ -z "$cuda" ] || [ "$(jq -r .cuda_version <<<"$js")" = "$cuda" ] && ok "CUDA version ${cuda:-?}" \
  || not_ok "CUDA version" "nvidia-smi $cuda, vgpu $(jq -r .cuda_version <<<"$js")"
while IFS=, read -r idx name uuid bus total used cmode mig; do
  idx=$(tr -d ' ' <<<"$idx"); name=$(sed 's/^ *//' <<<"$name")
  g=$(jq -c ".gpus[] | select(.is_mig_device == false and .index == $idx)" <<<"$js")
  [ -n "$g" ] || { not_ok "GPU $idx is listed"; continue; }
  for f in "name:$name" "uuid:$(tr -d ' ' <<<"$uuid")" "pci_bus_id:$(tr -d ' ' <<<"$bus")"; do
    k=${f%%:*} want=${f#*:}
    [ "$(jq -r ".$k" <<<"$g")" = "$want" ] && ok "GPU $idx $k: $want" || not_ok "GPU $idx $k" "nvidia-smi '$want', vgpu '$(jq -r ".$k" <<<"$g")'"
  done
  mine=$(( $(jq .mem_total_bytes <<<"$g") >> 20 )); total=$(tr -d ' ' <<<"$total")
  [ "$mine" = "$total" ] && ok "GPU $idx memory total $total MiB" || not_ok "GPU $idx memory total" "nvidia-smi $total MiB, vgpu $mine MiB"
  mine=$(( $(jq .mem_used_bytes <<<"$g") >> 20 )); used=$(tr -d ' ' <<<"$used")
  d=$((mine - used)); [ ${d#-} -le 16 ] && ok "GPU $idx memory used $used MiB (vgpu $mine)" \
    || not_ok "GPU $idx memory used" "nvidia-smi $used MiB, vgpu $mine MiB"
  want=$(lower <<<"$cmode")
  [ "$(jq -r .compute_mode <<<"$g")" = "$want" ] && ok "GPU $idx compute mode $want" \
    || not_ok "GPU $idx compute mode" "nvidia-smi $want, vgpu $(jq -r .compute_mode <<<"$g")"
  want=$(lower <<<"$mig")
  case $want in *n/a*) want=null ;; esac
  [ "$(jq -r .mig_mode_current <<<"$g")" = "$want" ] && ok "GPU $idx MIG mode $want" \
    || not_ok "GPU $idx MIG mode" "nvidia-smi $want, vgpu $(jq -r .mig_mode_current <<<"$g")"
done < <(nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,memory.used,compute_mode,mig.mode.current \
           --format=csv,noheader,nounits)
echo "# $n tests, $fail failed"
[ $fail = 0 ]
