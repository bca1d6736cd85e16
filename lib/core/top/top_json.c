/* vgpu top's JSON form (DESIGN.md decision 8): one object per sample, "schema": 1, numbers
 * with the unit in the key, null for "not available". Documented in man/vgpu-top.1. */
#include "vgpu/top.h"

#include <stdio.h>
#include <string.h>

#include "vgpu/json.h"
#include "vgpu/units.h"

static struct json_object *gpu_json(const struct top_model *m, const struct top_gpu *g)
{
    struct json_object *o = json_object_new_object();
    vgpu_json_u64(o, "index", g->index);
    vgpu_json_bool(o, "is_mig_device", g->is_mig);
    if (g->is_mig) {
        vgpu_json_u64(o, "gpu_instance_id", g->gi);
        vgpu_json_u64(o, "compute_instance_id", g->ci);
        vgpu_json_str(o, "mig_profile", g->profile[0] ? g->profile : NULL);
    }
    vgpu_json_str(o, "name", g->name);
    vgpu_json_str(o, "uuid", g->uuid[0] ? g->uuid : NULL);
    vgpu_json_str(o, "pci_bus_id", g->pci_bus_id[0] ? g->pci_bus_id : NULL);
    vgpu_json_bool(o, "lost", g->lost);
    unsigned v = g->valid;
    vgpu_json_u64_or_null(o, "util_gpu_percent", v & TOP_GV_UTIL, g->util_pct);
    vgpu_json_u64_or_null(o, "util_mem_percent", v & TOP_GV_MEMUTIL, g->mem_util_pct);
    vgpu_json_u64_or_null(o, "mem_used_bytes", v & TOP_GV_MEM, g->mem_used);
    vgpu_json_u64_or_null(o, "mem_total_bytes", v & TOP_GV_MEM, g->mem_total);
    vgpu_json_u64_or_null(o, "temperature_celsius", v & TOP_GV_TEMP, g->temp_c);
    vgpu_json_u64_or_null(o, "power_draw_milliwatts", v & TOP_GV_POWER, g->power_mw);
    vgpu_json_u64_or_null(o, "power_limit_milliwatts", v & TOP_GV_PLIMIT, g->power_limit_mw);
    vgpu_json_u64_or_null(o, "clock_sm_mhz", v & TOP_GV_SMCLK, g->sm_clock_mhz);
    vgpu_json_u64_or_null(o, "clock_mem_mhz", v & TOP_GV_MEMCLK, g->mem_clock_mhz);
    vgpu_json_u64_or_null(o, "fan_percent", v & TOP_GV_FAN, g->fan_pct);
    vgpu_json_u64_or_null(o, "pcie_link_gen", v & TOP_GV_PCIE, g->pcie_gen);
    vgpu_json_u64_or_null(o, "pcie_link_width", v & TOP_GV_PCIE, g->pcie_width);
    vgpu_json_u64_or_null(o, "encoder_percent", v & TOP_GV_ENC, g->enc_pct);
    vgpu_json_u64_or_null(o, "decoder_percent", v & TOP_GV_DEC, g->dec_pct);
    if (g->is_mig || !(v & TOP_GV_MIG)) {
        vgpu_json_null(o, "mig_mode_current");
        vgpu_json_null(o, "mig_mode_pending");
    } else {
        vgpu_json_str(o, "mig_mode_current", g->mig_current ? "enabled" : "disabled");
        vgpu_json_str(o, "mig_mode_pending", g->mig_pending ? "enabled" : "disabled");
    }
    /* jobs that have a process on this device */
    struct json_object *jobs = json_object_new_array();
    unsigned gi = (unsigned)(g - m->gpus);
    for (unsigned j = 0; j < m->njob; j++)
        for (size_t p = 0; p < m->nproc; p++)
            if (m->procs[p].job == (int)j && m->procs[p].gpu == (int)gi) {
                json_object_array_add(jobs, json_object_new_string(m->jobs[j].id));
                break;
            }
    json_object_object_add(o, "jobs", jobs);
    return o;
}

static struct json_object *job_json(const struct top_job *j)
{
    struct json_object *o = json_object_new_object();
    vgpu_json_str(o, "id", j->id);
    /* The model shows the id where a job has no name; the document says null, as vgpu ps does. */
    vgpu_json_str(o, "name", strcmp(j->name, j->id) ? j->name : NULL);
    vgpu_json_str(o, "owner", j->owner[0] ? j->owner : NULL);
    vgpu_json_u64(o, "owner_uid", (uint64_t)j->uid);
    vgpu_json_str(o, "gpus", j->gpus[0] ? j->gpus : NULL);
    vgpu_json_u64(o, "mem_used_bytes", j->mem_used);
    vgpu_json_u64_or_null(o, "mem_limit_bytes", j->mem_limit != 0, j->mem_limit);
    vgpu_json_u64_or_null(o, "nvml_used_bytes", j->mem_nvml_valid, j->mem_nvml);
    vgpu_json_u64_or_null(o, "core_limit_percent", j->core_limit_pct != 0, j->core_limit_pct);
    vgpu_json_str(o, "core_policy", !j->core_limit_pct ? NULL : j->soft ? "soft" : "hard");
    if (j->share_valid)
        vgpu_json_dbl(o, "gpu_time_percent", j->share_pct);
    else
        vgpu_json_null(o, "gpu_time_percent");
    if (j->share_valid && j->share_ndev > 1) {
        struct json_object *per = json_object_new_array();
        for (unsigned d = 0; d < j->share_ndev; d++)
            json_object_array_add(per, json_object_new_double(j->share_dev_pct[d]));
        json_object_object_add(o, "gpu_time_percent_per_gpu", per);
    } else {
        vgpu_json_null(o, "gpu_time_percent_per_gpu");
    }
    vgpu_json_u64(o, "throttled_ns", j->throttled_ns);
    vgpu_json_i64(o, "priority", j->priority);   /* a number before priority_name: kept as it was */
    vgpu_json_str(o, "priority_name", vgpu_priority_name(j->priority));
    vgpu_json_u64(o, "processes", j->nproc);
    vgpu_json_u64(o, "outside_bytes", j->mem_outside);
    vgpu_json_u64(o, "outside_processes", j->outside_count);
    vgpu_json_u64_or_null(o, "mem_request_bytes", j->mem_limit != 0, j->mem_request);
    vgpu_json_u64(o, "mem_borrowed_bytes", j->mem_borrowed);
    vgpu_json_u64(o, "mem_demoted_bytes", j->mem_demoted);
    vgpu_json_bool(o, "oversubscribed", j->oversub);
    vgpu_json_u64(o, "mem_on_device_bytes", j->mem_used > j->mem_off_device ? j->mem_used - j->mem_off_device : 0);
    vgpu_json_u64(o, "mem_off_device_bytes", j->mem_off_device);
    vgpu_json_u64_or_null(o, "mem_device_limit_bytes", j->oversub && j->mem_device_limit != UINT64_MAX,
                          j->mem_device_limit);
    vgpu_json_u64_or_null(o, "migration_bytes_per_s", j->oversub && j->migration_valid,
                          (uint64_t)(j->migration_bps + 0.5));
    return o;
}

static struct json_object *proc_json(const struct top_model *m, const struct top_proc *p)
{
    struct json_object *o = json_object_new_object();
    vgpu_json_i64(o, "pid", p->pid);
    vgpu_json_str(o, "user", p->user[0] ? p->user : NULL);
    vgpu_json_u64(o, "uid", (uint64_t)p->uid);
    bool in_job = p->job >= 0 && (unsigned)p->job < m->njob;
    vgpu_json_str(o, "job", in_job ? m->jobs[p->job].id : NULL);
    vgpu_json_bool(o, "outside_limiter", in_job && p->outside);
    bool on_gpu = p->gpu >= 0 && (unsigned)p->gpu < m->ngpu;
    if (on_gpu) {
        vgpu_json_u64(o, "gpu_index", m->gpus[p->gpu].index);
        vgpu_json_str(o, "gpu_uuid", m->gpus[p->gpu].uuid);
    } else {
        vgpu_json_null(o, "gpu_index");
        vgpu_json_null(o, "gpu_uuid");
    }
    vgpu_json_u64_or_null(o, "gpu_mem_bytes", p->valid & TOP_PV_MEM, p->gpu_mem);
    vgpu_json_u64_or_null(o, "sm_percent", p->valid & TOP_PV_SM, p->sm_pct);
    if (p->valid & TOP_PV_CPU)
        vgpu_json_dbl(o, "cpu_percent", p->cpu_pct);
    else
        vgpu_json_null(o, "cpu_percent");
    vgpu_json_str(o, "command", p->cmd[0] ? p->cmd : NULL);
    return o;
}

struct json_object *top_model_json(const struct top_model *m)
{
    struct json_object *doc = vgpu_json_doc();
    vgpu_json_i64(doc, "time_unix_ms", m->time_ms);
    struct json_object *nv = json_object_new_object();
    vgpu_json_str(nv, "status", top_nvml_status_name(m->nvml));
    vgpu_json_str(nv, "message", m->nvml_msg[0] ? m->nvml_msg : NULL);
    vgpu_json_str(nv, "driver_version", m->driver_version[0] ? m->driver_version : NULL);
    vgpu_json_str(nv, "cuda_version", m->cuda_version[0] ? m->cuda_version : NULL);
    json_object_object_add(doc, "nvml", nv);
    vgpu_json_str(doc, "jobs_error", m->jobs_msg[0] ? m->jobs_msg : NULL);
    struct json_object *a = json_object_new_array();
    for (unsigned i = 0; i < m->ngpu; i++)
        json_object_array_add(a, gpu_json(m, &m->gpus[i]));
    json_object_object_add(doc, "gpus", a);
    a = json_object_new_array();
    for (unsigned i = 0; i < m->njob; i++)
        json_object_array_add(a, job_json(&m->jobs[i]));
    json_object_object_add(doc, "jobs", a);
    a = json_object_new_array();
    for (size_t i = 0; i < m->nproc; i++)
        json_object_array_add(a, proc_json(m, &m->procs[i]));
    json_object_object_add(doc, "processes", a);
    return doc;
}
