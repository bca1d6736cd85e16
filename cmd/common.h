/* Helpers shared by the commands (cmd/common.c). */
#ifndef VGPU_CMD_COMMON_H
#define VGPU_CMD_COMMON_H

#include "vgpu/closest.h"

#endif
