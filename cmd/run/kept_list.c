/* vgpu run and the GPU list kept between jobs (see run/kept_list.h and vgpu/gpu_cache.h). */
#include "run/kept_list.h"

#include <string.h>

#include "vgpu/acct.h"
#include "vgpu/gpu_cache.h"
#include "vgpu/log.h"
#include "vgpu/nvml.h"

static struct vgpu_gpu_list kept;
static bool used, checked;

bool vgpu_run_kept_list(struct vgpu_gpu_list *list)
{
    if (vgpu_gpu_cache_load(list) != 1)
        return false;
    kept = *list;
    used = true;
    return true;
}

void vgpu_run_kept_list_check(struct vgpu_region *r)
{
    if (!used || checked)
        return;
    checked = true;
    struct vgpu_err e = { 0 };
    struct vgpu_nvml *nv = vgpu_nvml_open(&e);
    static struct vgpu_gpu_list now;
    if (!nv || vgpu_gpus_enumerate(nv, &now, &e) < 0) {
        vgpu_gpu_cache_forget();
        vgpu_warn("the GPU list kept from an earlier job set this one up, and NVML cannot tell whether it still "
                  "holds: %s; the next job asks NVML before it starts",
                  e.msg[0] ? e.msg : "no list");
        if (nv)
            vgpu_nvml_close(nv);
        return;
    }
    char why[256] = "";
    bool agrees = true;
    for (unsigned d = 0; d < vgpu_region_device_count(r) && agrees; d++)
        agrees = vgpu_gpu_cache_agrees(&kept, &now, r->info->dev[d].uuid, why, sizeof why);
    if (agrees) {
        vgpu_gpu_cache_store(&now);
    } else {
        vgpu_gpu_cache_forget();
        vgpu_warn("job %s was set up from the GPU list kept from an earlier job, which is out of date: %s; the next "
                  "job asks NVML before it starts (vgpu list shows the GPUs now)",
                  r->info->id, why);
    }
    vgpu_acct_nvml_adopt(nv);
}
