/* vgpu_nvml.h: the subset of NVML's ABI that vgpu and the simulated GPU use, written by hand
 * (DESIGN.md decision 1: no vendor header at build time). Every name is NVML's own, so
 * tests/cli/abi.sh can compare each enumerator, #define, struct size and member offset with a
 * real nvml.h. Facts: shared/reference/nvml.md §1-§10 (header 13.3.29 / CUDA 13.0, driver
 * 580.159.04). x86-64 SysV: enums are 4-byte ints, handles are opaque 8-byte pointers.
 *
 * Layout rules kept for tests/unit/abi_facts.awk: one member per line, enumerators written
 * "NAME = value", "} name;" closing each typedef. Names that are ours, not NVML's, start VGPU_.
 * Entry points are called through the vgpu_<symbol>_fn pointer types at the end: resolve the
 * versioned symbol (nvmlInit_v2, ..._v3) with dlsym, never the unversioned macro name. */
#ifndef VGPU_NVML_ABI_H
#define VGPU_NVML_ABI_H

#include <stddef.h>

/* ---- return codes (reference §7) ------------------------------------------------------ */
typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* 30 RESET_TYPE_NOT_SUPPORTED exists only in newer headers than CUDA 13.0's: kept out of the enum. */
#define VGPU_NVML_ERROR_RESET_TYPE_NOT_SUPPORTED 30

/* ---- opaque handles ------------------------------------------------------------------- */
typedef struct nvmlDevice_st *nvmlDevice_t;               /* also a MIG device handle */
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;

/* ---- buffer sizes and flags (reference §1) ------------------------------------------- */
#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2
/* usedGpuMemory when the driver cannot tell (NVML's own macro is spelled (-1) in some headers). */
#define VGPU_NVML_VALUE_NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFULL
/* gpuInstanceId / computeInstanceId of a process that is not in a MIG instance. */
#define VGPU_NVML_NO_INSTANCE 0xFFFFFFFFu

/* ---- enums ---------------------------------------------------------------------------- */
typedef enum nvmlEnableState_enum {
    NVML_FEATURE_DISABLED = 0,
    NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

/* How close two GPUs sit: the nearest thing on the path between them (nvmlDeviceGetTopologyCommonAncestor). */
typedef enum nvmlGpuLevel_enum {
    NVML_TOPOLOGY_INTERNAL = 0,          /* the same board (multi-GPU boards) */
    NVML_TOPOLOGY_SINGLE = 10,           /* one PCIe switch */
    NVML_TOPOLOGY_MULTIPLE = 20,         /* several PCIe switches, no host bridge */
    NVML_TOPOLOGY_HOSTBRIDGE = 30,       /* one host bridge */
    NVML_TOPOLOGY_NODE = 40,             /* one NUMA node (host bridges of one CPU) */
    NVML_TOPOLOGY_SYSTEM = 50            /* across CPUs */
} nvmlGpuTopologyLevel_t;

typedef enum nvmlGpuP2PCapsIndex_enum {
    NVML_P2P_CAPS_INDEX_READ = 0,
    NVML_P2P_CAPS_INDEX_WRITE = 1,
    NVML_P2P_CAPS_INDEX_NVLINK = 2,
    NVML_P2P_CAPS_INDEX_ATOMICS = 3,
    NVML_P2P_CAPS_INDEX_PCI = 4,
    NVML_P2P_CAPS_INDEX_UNKNOWN = 5
} nvmlGpuP2PCapsIndex_t;

typedef enum nvmlGpuP2PStatus_enum {
    NVML_P2P_STATUS_OK = 0,
    NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED = 1,   /* (sic, NVML's spelling) */
    NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
    NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
    NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
    NVML_P2P_STATUS_NOT_SUPPORTED = 5,
    NVML_P2P_STATUS_UNKNOWN = 6
} nvmlGpuP2PStatus_t;

#define NVML_NVLINK_MAX_LINKS 18

typedef enum nvmlComputeMode_enum {
    NVML_COMPUTEMODE_DEFAULT = 0,
    NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
    NVML_COMPUTEMODE_PROHIBITED = 2,
    NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
    NVML_COMPUTEMODE_COUNT = 4
} nvmlComputeMode_t;

typedef enum nvmlTemperatureSensors_enum {
    NVML_TEMPERATURE_GPU = 0
} nvmlTemperatureSensors_t;

typedef enum nvmlClockType_enum {
    NVML_CLOCK_GRAPHICS = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_CLOCK_VIDEO = 3
} nvmlClockType_t;

/* ---- MIG constants (reference §9; *_COUNT differs between headers: never declared) ---- */
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0
/* Index past the last GI profile index we know (the driver answers INVALID_ARGUMENT from 17 on). */
#define VGPU_NVML_GI_PROFILE_INDEX_END 17
#define VGPU_NVML_CI_PROFILE_INDEX_END 9

/* ---- structs (reference §3) ----------------------------------------------------------- */
typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;   /* includes driver-reserved memory */
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;      /* nvmlMemory_v2 */
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;   /* excludes reserved */
} nvmlMemory_v2_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;     /* device << 16 | vendor, e.g. 0x233010DE */
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

/* Field values (nvmlDeviceGetFieldValues): the PCIe byte counters vgpu reads for the rate of
 * migration of spilled memory (lib/core/gpu/migration.c). nvml.h: "PCIe transmit bytes. Value can
 * be wrapped." Added with driver 550. */
#define NVML_FI_DEV_PCIE_COUNT_TX_BYTES 197
#define NVML_FI_DEV_PCIE_COUNT_RX_BYTES 198

typedef enum nvmlValueType_enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4
} nvmlValueType_t;

typedef union nvmlValue_st {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
} nvmlValue_t;

/* The driver's buffer of device samples (nvmlDeviceGetSamples): about 25 s of them, each a
 * reading over the sampling period that ends at its timeStamp (host wall clock, µs). vgpu reads
 * the GPU utilisation ones ("percent of time during which one or more kernels was executing",
 * as unsigned int) for the GPU's busy time (lib/core/acct/nvml_sample.c). */
typedef enum nvmlSamplingType_enum {
    NVML_TOTAL_POWER_SAMPLES = 0,
    NVML_GPU_UTILIZATION_SAMPLES = 1,
    NVML_MEMORY_UTILIZATION_SAMPLES = 2,
    NVML_ENC_UTILIZATION_SAMPLES = 3,
    NVML_DEC_UTILIZATION_SAMPLES = 4,
    NVML_PROCESSOR_CLK_SAMPLES = 5,
    NVML_MEMORY_CLK_SAMPLES = 6,
    NVML_MODULE_POWER_SAMPLES = 7,
    NVML_JPG_UTILIZATION_SAMPLES = 8,
    NVML_OFA_UTILIZATION_SAMPLES = 9
} nvmlSamplingType_t;

typedef struct nvmlSample_st {
    unsigned long long timeStamp; /* host wall clock, µs since the epoch */
    nvmlValue_t sampleValue;      /* the member nvmlDeviceGetSamples' sampleValType names */
} nvmlSample_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;        /* set by the caller */
    unsigned int scopeId;        /* set by the caller (0: the device) */
    long long timestamp;         /* CPU time of the reading, microseconds */
    long long latencyUsec;
    nvmlValueType_t valueType;   /* which member of value holds it */
    nvmlReturn_t nvmlReturn;     /* this field's own status */
    nvmlValue_t value;
} nvmlFieldValue_t;

/* Plain Get*RunningProcesses (16-byte records). */
typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* _v2 and _v3 Get*RunningProcesses (24-byte records, reference §4). */
typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef nvmlProcessInfo_v2_t nvmlProcessInfo_t;

typedef struct nvmlProcessDetail_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
    unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessDetail_v1_t;

typedef struct nvmlProcessDetailList_v1_st {
    unsigned int version;
    unsigned int mode;            /* 0 compute, 1 graphics, 2 MPS, 3 all */
    unsigned int numProcArrayEntries;
    nvmlProcessDetail_v1_t *procArray;
} nvmlProcessDetailList_v1_t;

typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp; /* host wall clock, µs since the epoch */
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct nvmlProcessUtilizationInfo_v1_st {
    unsigned long long timeStamp;
    unsigned int pid;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
    unsigned int jpgUtil;
    unsigned int ofaUtil;
} nvmlProcessUtilizationInfo_v1_t;

typedef struct nvmlProcessesUtilizationInfo_v1_st {
    unsigned int version;             /* nvmlProcessesUtilizationInfo_v1 */
    unsigned int processSamplesCount; /* in: capacity of procUtilArray, out: written / needed */
    unsigned long long lastSeenTimeStamp;
    nvmlProcessUtilizationInfo_v1_t *procUtilArray;
} nvmlProcessesUtilizationInfo_v1_t;
typedef nvmlProcessesUtilizationInfo_v1_t nvmlProcessesUtilizationInfo_t;

typedef struct nvmlGpuInstancePlacement_st {
    unsigned int start;
    unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct nvmlComputeInstancePlacement_st {
    unsigned int start;
    unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlGpuInstanceProfileInfo_v2_t;

typedef struct nvmlGpuInstanceProfileInfo_v3_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int capabilities;
} nvmlGpuInstanceProfileInfo_v3_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlComputeInstanceProfileInfo_v2_t;

typedef struct nvmlComputeInstanceProfileInfo_v3_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int capabilities;
} nvmlComputeInstanceProfileInfo_v3_t;

/* nvmlDeviceGetAttributes_v2: mostly for MIG device handles (a whole GPU has no slices). */
typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct nvmlGpuInstanceInfo_st {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstanceInfo_st {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id;
    unsigned int profileId;
    nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

/* ---- struct version words (reference §2): sizeof | version << 24 ------------------------ */
#define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)
#define nvmlProcessesUtilizationInfo_v1 NVML_STRUCT_VERSION(ProcessesUtilizationInfo, 1)
#define nvmlProcessDetailList_v1 NVML_STRUCT_VERSION(ProcessDetailList, 1)
#define nvmlGpuInstanceProfileInfo_v2 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)
#define nvmlGpuInstanceProfileInfo_v3 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 3)
#define nvmlComputeInstanceProfileInfo_v2 NVML_STRUCT_VERSION(ComputeInstanceProfileInfo, 2)
#define nvmlComputeInstanceProfileInfo_v3 NVML_STRUCT_VERSION(ComputeInstanceProfileInfo, 3)

/* ---- layout checks: the numbers of reference §2/§3 ------------------------------------ */
#define VGPU_NVML_LAYOUT(t, size) _Static_assert(sizeof(t) == (size), "sizeof " #t)
#define VGPU_NVML_AT(t, f, off) _Static_assert(offsetof(t, f) == (off), "offsetof " #t "." #f)
VGPU_NVML_LAYOUT(nvmlReturn_t, 4);
VGPU_NVML_LAYOUT(nvmlDevice_t, 8);
VGPU_NVML_LAYOUT(nvmlMemory_t, 24);
VGPU_NVML_AT(nvmlMemory_t, used, 16);
VGPU_NVML_LAYOUT(nvmlMemory_v2_t, 40);
VGPU_NVML_AT(nvmlMemory_v2_t, total, 8);
VGPU_NVML_AT(nvmlMemory_v2_t, reserved, 16);
VGPU_NVML_AT(nvmlMemory_v2_t, free, 24);
VGPU_NVML_AT(nvmlMemory_v2_t, used, 32);
VGPU_NVML_LAYOUT(nvmlUtilization_t, 8);
VGPU_NVML_LAYOUT(nvmlPciInfo_t, 68);
VGPU_NVML_LAYOUT(nvmlValue_t, 8);
VGPU_NVML_LAYOUT(nvmlSample_t, 16);
VGPU_NVML_AT(nvmlSample_t, sampleValue, 8);
VGPU_NVML_LAYOUT(nvmlFieldValue_t, 40);
VGPU_NVML_AT(nvmlFieldValue_t, valueType, 24);
VGPU_NVML_AT(nvmlFieldValue_t, nvmlReturn, 28);
VGPU_NVML_AT(nvmlFieldValue_t, value, 32);
VGPU_NVML_AT(nvmlPciInfo_t, domain, 16);
VGPU_NVML_AT(nvmlPciInfo_t, pciDeviceId, 28);
VGPU_NVML_AT(nvmlPciInfo_t, pciSubSystemId, 32);
VGPU_NVML_AT(nvmlPciInfo_t, busId, 36);
VGPU_NVML_LAYOUT(nvmlProcessInfo_v1_t, 16);
VGPU_NVML_AT(nvmlProcessInfo_v1_t, usedGpuMemory, 8);
VGPU_NVML_LAYOUT(nvmlProcessInfo_v2_t, 24);
VGPU_NVML_AT(nvmlProcessInfo_v2_t, gpuInstanceId, 16);
VGPU_NVML_AT(nvmlProcessInfo_v2_t, computeInstanceId, 20);
VGPU_NVML_LAYOUT(nvmlProcessDetail_v1_t, 32);
VGPU_NVML_AT(nvmlProcessDetail_v1_t, usedGpuCcProtectedMemory, 24);
VGPU_NVML_LAYOUT(nvmlProcessDetailList_v1_t, 24);
VGPU_NVML_AT(nvmlProcessDetailList_v1_t, procArray, 16);
VGPU_NVML_LAYOUT(nvmlProcessUtilizationSample_t, 32);
VGPU_NVML_AT(nvmlProcessUtilizationSample_t, timeStamp, 8);
VGPU_NVML_AT(nvmlProcessUtilizationSample_t, smUtil, 16);
VGPU_NVML_AT(nvmlProcessUtilizationSample_t, decUtil, 28);
VGPU_NVML_LAYOUT(nvmlProcessUtilizationInfo_v1_t, 40);
VGPU_NVML_AT(nvmlProcessUtilizationInfo_v1_t, pid, 8);
VGPU_NVML_AT(nvmlProcessUtilizationInfo_v1_t, ofaUtil, 32);
VGPU_NVML_LAYOUT(nvmlProcessesUtilizationInfo_v1_t, 24);
VGPU_NVML_AT(nvmlProcessesUtilizationInfo_v1_t, lastSeenTimeStamp, 8);
VGPU_NVML_AT(nvmlProcessesUtilizationInfo_v1_t, procUtilArray, 16);
VGPU_NVML_LAYOUT(nvmlGpuInstancePlacement_t, 8);
VGPU_NVML_LAYOUT(nvmlComputeInstancePlacement_t, 8);
VGPU_NVML_LAYOUT(nvmlGpuInstanceProfileInfo_t, 48);
VGPU_NVML_AT(nvmlGpuInstanceProfileInfo_t, memorySizeMB, 40);
VGPU_NVML_LAYOUT(nvmlGpuInstanceProfileInfo_v2_t, 152);
VGPU_NVML_AT(nvmlGpuInstanceProfileInfo_v2_t, ofaCount, 40);
VGPU_NVML_AT(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB, 48);
VGPU_NVML_AT(nvmlGpuInstanceProfileInfo_v2_t, name, 56);
VGPU_NVML_LAYOUT(nvmlGpuInstanceProfileInfo_v3_t, 152);
VGPU_NVML_AT(nvmlGpuInstanceProfileInfo_v3_t, memorySizeMB, 40);
VGPU_NVML_AT(nvmlGpuInstanceProfileInfo_v3_t, name, 48);
VGPU_NVML_AT(nvmlGpuInstanceProfileInfo_v3_t, capabilities, 144);
VGPU_NVML_LAYOUT(nvmlComputeInstanceProfileInfo_t, 36);
VGPU_NVML_LAYOUT(nvmlComputeInstanceProfileInfo_v2_t, 136);
VGPU_NVML_AT(nvmlComputeInstanceProfileInfo_v2_t, name, 40);
VGPU_NVML_LAYOUT(nvmlComputeInstanceProfileInfo_v3_t, 140);
VGPU_NVML_AT(nvmlComputeInstanceProfileInfo_v3_t, capabilities, 136);
VGPU_NVML_LAYOUT(nvmlDeviceAttributes_t, 40);
VGPU_NVML_AT(nvmlDeviceAttributes_t, memorySizeMB, 32);
VGPU_NVML_LAYOUT(nvmlGpuInstanceInfo_t, 24);
VGPU_NVML_AT(nvmlGpuInstanceInfo_t, placement, 16);
VGPU_NVML_LAYOUT(nvmlComputeInstanceInfo_t, 32);
VGPU_NVML_AT(nvmlComputeInstanceInfo_t, placement, 24);
_Static_assert(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2");
_Static_assert(nvmlProcessesUtilizationInfo_v1 == 0x01000018u, "nvmlProcessesUtilizationInfo_v1");
_Static_assert(nvmlProcessDetailList_v1 == 0x01000018u, "nvmlProcessDetailList_v1");
_Static_assert(nvmlGpuInstanceProfileInfo_v2 == 0x02000098u, "nvmlGpuInstanceProfileInfo_v2");
_Static_assert(nvmlGpuInstanceProfileInfo_v3 == 0x03000098u, "nvmlGpuInstanceProfileInfo_v3");
_Static_assert(nvmlComputeInstanceProfileInfo_v2 == 0x02000088u, "nvmlComputeInstanceProfileInfo_v2");
_Static_assert(nvmlComputeInstanceProfileInfo_v3 == 0x0300008Cu, "nvmlComputeInstanceProfileInfo_v3");
#undef VGPU_NVML_LAYOUT
#undef VGPU_NVML_AT

/* ---- entry points: vgpu_<exported symbol>_fn ------------------------------------------- */
#define VGPU_NVML_DEV_U(sym) typedef nvmlReturn_t (*vgpu_##sym##_fn)(nvmlDevice_t, unsigned int *)

/* init, system */
typedef nvmlReturn_t (*vgpu_nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*vgpu_nvmlInit_fn)(void);
typedef nvmlReturn_t (*vgpu_nvmlInitWithFlags_fn)(unsigned int flags);
typedef nvmlReturn_t (*vgpu_nvmlShutdown_fn)(void);
typedef const char *(*vgpu_nvmlErrorString_fn)(nvmlReturn_t result);
typedef nvmlReturn_t (*vgpu_nvmlSystemGetDriverVersion_fn)(char *version, unsigned int length);
typedef nvmlReturn_t (*vgpu_nvmlSystemGetNVMLVersion_fn)(char *version, unsigned int length);
typedef nvmlReturn_t (*vgpu_nvmlSystemGetCudaDriverVersion_fn)(int *cudaDriverVersion);
typedef nvmlReturn_t (*vgpu_nvmlSystemGetCudaDriverVersion_v2_fn)(int *cudaDriverVersion);

/* device identity */
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetCount_v2_fn)(unsigned int *deviceCount);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetCount_fn)(unsigned int *deviceCount);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetHandleByIndex_fn)(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetHandleByUUID_fn)(const char *uuid, nvmlDevice_t *device);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetHandleByPciBusId_v2_fn)(const char *pciBusId, nvmlDevice_t *device);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetHandleByPciBusId_fn)(const char *pciBusId, nvmlDevice_t *device);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetName_fn)(nvmlDevice_t device, char *name, unsigned int length);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetUUID_fn)(nvmlDevice_t device, char *uuid, unsigned int length);
VGPU_NVML_DEV_U(nvmlDeviceGetIndex);
VGPU_NVML_DEV_U(nvmlDeviceGetMinorNumber);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetPciInfo_v3_fn)(nvmlDevice_t device, nvmlPciInfo_t *pci);

/* memory, utilisation, sensors */
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t device, nvmlMemory_t *memory);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetMemoryInfo_v2_fn)(nvmlDevice_t device, nvmlMemory_v2_t *memory);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t device, nvmlUtilization_t *utilization);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetTemperature_fn)(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                                         unsigned int *temp);
VGPU_NVML_DEV_U(nvmlDeviceGetPowerUsage);           /* milliwatts */
VGPU_NVML_DEV_U(nvmlDeviceGetEnforcedPowerLimit);   /* milliwatts */
VGPU_NVML_DEV_U(nvmlDeviceGetPowerManagementLimit); /* milliwatts */
/* millijoules since the driver loaded (Volta and later; NOT_SUPPORTED elsewhere) */
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetTotalEnergyConsumption_fn)(nvmlDevice_t device, unsigned long long *energy);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetClockInfo_fn)(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetMaxClockInfo_fn)(nvmlDevice_t device, nvmlClockType_t type,
                                                          unsigned int *clock);
VGPU_NVML_DEV_U(nvmlDeviceGetFanSpeed);             /* percent */
VGPU_NVML_DEV_U(nvmlDeviceGetCurrPcieLinkGeneration);
VGPU_NVML_DEV_U(nvmlDeviceGetCurrPcieLinkWidth);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetFieldValues_fn)(nvmlDevice_t device, int valuesCount,
                                                         nvmlFieldValue_t *values);
/* Two-call protocol: samples NULL gives in *sampleCount how many can be read; then at most
 * *sampleCount of those newer than lastSeenTimeStamp, *sampleCount set to how many were.
 * NOT_FOUND: none newer. */
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetSamples_fn)(nvmlDevice_t device, nvmlSamplingType_t type,
                                                     unsigned long long lastSeenTimeStamp,
                                                     nvmlValueType_t *sampleValType, unsigned int *sampleCount,
                                                     nvmlSample_t *samples);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetEncoderUtilization_fn)(nvmlDevice_t device, unsigned int *utilization,
                                                                unsigned int *samplingPeriodUs);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetDecoderUtilization_fn)(nvmlDevice_t device, unsigned int *utilization,
                                                                unsigned int *samplingPeriodUs);

/* compute mode */
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetComputeMode_fn)(nvmlDevice_t device, nvmlComputeMode_t *mode);
typedef nvmlReturn_t (*vgpu_nvmlDeviceSetComputeMode_fn)(nvmlDevice_t device, nvmlComputeMode_t mode);

/* processes (two-call protocol, reference §5) */
#define VGPU_NVML_PROCS(sym, rec) \
    typedef nvmlReturn_t (*vgpu_##sym##_fn)(nvmlDevice_t device, unsigned int *infoCount, rec *infos)
VGPU_NVML_PROCS(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t);
VGPU_NVML_PROCS(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_v2_t);
VGPU_NVML_PROCS(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_v2_t);
VGPU_NVML_PROCS(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t);
VGPU_NVML_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t);
VGPU_NVML_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_v2_t);
VGPU_NVML_PROCS(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t);
VGPU_NVML_PROCS(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t);
VGPU_NVML_PROCS(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_v2_t);
#undef VGPU_NVML_PROCS
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetRunningProcessDetailList_fn)(nvmlDevice_t device,
                                                                      nvmlProcessDetailList_v1_t *plist);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetProcessUtilization_fn)(nvmlDevice_t device,
                                                                nvmlProcessUtilizationSample_t *utilization,
                                                                unsigned int *processSamplesCount,
                                                                unsigned long long lastSeenTimeStamp);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetProcessesUtilizationInfo_fn)(nvmlDevice_t device,
                                                                      nvmlProcessesUtilizationInfo_t *procesesUtilInfo);

/* MIG mode and device handles (reference §9) */
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetMigMode_fn)(nvmlDevice_t device, unsigned int *currentMode,
                                                     unsigned int *pendingMode);
typedef nvmlReturn_t (*vgpu_nvmlDeviceSetMigMode_fn)(nvmlDevice_t device, unsigned int mode,
                                                     nvmlReturn_t *activationStatus);
VGPU_NVML_DEV_U(nvmlDeviceGetMaxMigDeviceCount);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t device, unsigned int index,
                                                                    nvmlDevice_t *migDevice);
VGPU_NVML_DEV_U(nvmlDeviceIsMigDeviceHandle);
VGPU_NVML_DEV_U(nvmlDeviceGetGpuInstanceId);
VGPU_NVML_DEV_U(nvmlDeviceGetComputeInstanceId);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetAttributes_v2_fn)(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn)(nvmlDevice_t migDevice,
                                                                             nvmlDevice_t *device);

/* GPU instances */
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetGpuInstanceProfileInfo_fn)(nvmlDevice_t device, unsigned int profile,
                                                                    nvmlGpuInstanceProfileInfo_t *info);
/* info points at a _v2_t or _v3_t whose version word the caller set */
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetGpuInstanceProfileInfoV_fn)(nvmlDevice_t device, unsigned int profile,
                                                                     nvmlGpuInstanceProfileInfo_v2_t *info);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetGpuInstanceProfileInfoByIdV_fn)(nvmlDevice_t device,
                                                                         unsigned int profileId,
                                                                         nvmlGpuInstanceProfileInfo_v2_t *info);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetGpuInstancePossiblePlacements_v2_fn)(nvmlDevice_t device,
                                                                              unsigned int profileId,
                                                                              nvmlGpuInstancePlacement_t *placements,
                                                                              unsigned int *count);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetGpuInstanceRemainingCapacity_fn)(nvmlDevice_t device,
                                                                          unsigned int profileId,
                                                                          unsigned int *count);
typedef nvmlReturn_t (*vgpu_nvmlDeviceCreateGpuInstance_fn)(nvmlDevice_t device, unsigned int profileId,
                                                            nvmlGpuInstance_t *gpuInstance);
typedef nvmlReturn_t (*vgpu_nvmlDeviceCreateGpuInstanceWithPlacement_fn)(
    nvmlDevice_t device, unsigned int profileId, const nvmlGpuInstancePlacement_t *placement,
    nvmlGpuInstance_t *gpuInstance);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetGpuInstances_fn)(nvmlDevice_t device, unsigned int profileId,
                                                          nvmlGpuInstance_t *gpuInstances, unsigned int *count);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetGpuInstanceById_fn)(nvmlDevice_t device, unsigned int id,
                                                             nvmlGpuInstance_t *gpuInstance);
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceGetInfo_fn)(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info);
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceDestroy_fn)(nvmlGpuInstance_t gpuInstance);

/* compute instances */
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceGetComputeInstanceProfileInfo_fn)(nvmlGpuInstance_t gpuInstance,
                                                                             unsigned int profile,
                                                                             unsigned int engProfile,
                                                                             nvmlComputeInstanceProfileInfo_t *info);
/* info points at a _v2_t or _v3_t whose version word the caller set */
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceGetComputeInstanceProfileInfoV_fn)(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_v2_t *info);
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceGetComputeInstanceRemainingCapacity_fn)(nvmlGpuInstance_t gpuInstance,
                                                                                   unsigned int profileId,
                                                                                   unsigned int *count);
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceGetComputeInstancePossiblePlacements_fn)(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId, nvmlComputeInstancePlacement_t *placements,
    unsigned int *count);
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceCreateComputeInstance_fn)(nvmlGpuInstance_t gpuInstance,
                                                                     unsigned int profileId,
                                                                     nvmlComputeInstance_t *computeInstance);
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceCreateComputeInstanceWithPlacement_fn)(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId, const nvmlComputeInstancePlacement_t *placement,
    nvmlComputeInstance_t *computeInstance);
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceGetComputeInstances_fn)(nvmlGpuInstance_t gpuInstance,
                                                                   unsigned int profileId,
                                                                   nvmlComputeInstance_t *computeInstances,
                                                                   unsigned int *count);
typedef nvmlReturn_t (*vgpu_nvmlGpuInstanceGetComputeInstanceById_fn)(nvmlGpuInstance_t gpuInstance,
                                                                      unsigned int id,
                                                                      nvmlComputeInstance_t *computeInstance);
typedef nvmlReturn_t (*vgpu_nvmlComputeInstanceGetInfo_v2_fn)(nvmlComputeInstance_t computeInstance,
                                                              nvmlComputeInstanceInfo_t *info);
typedef nvmlReturn_t (*vgpu_nvmlComputeInstanceDestroy_fn)(nvmlComputeInstance_t computeInstance);

/* topology */
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetTopologyCommonAncestor_fn)(nvmlDevice_t device1, nvmlDevice_t device2,
                                                                    nvmlGpuTopologyLevel_t *pathInfo);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetP2PStatus_fn)(nvmlDevice_t device1, nvmlDevice_t device2,
                                                       nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus);
typedef nvmlReturn_t (*vgpu_nvmlDeviceGetNvLinkState_fn)(nvmlDevice_t device, unsigned int link,
                                                         nvmlEnableState_t *isActive);

#undef VGPU_NVML_DEV_U

#endif
