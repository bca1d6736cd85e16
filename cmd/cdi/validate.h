/* vgpu cdi validate: is a file a CDI spec that loaders accept, preloading the right library? */
#ifndef VGPU_CMD_CDI_VALIDATE_H
#define VGPU_CMD_CDI_VALIDATE_H

/* Prints each problem as an error, or one line saying the spec is valid. 0 valid; 1
 * (VGPU_EXIT_FAIL) unreadable or invalid. */
int cdi_validate_file(const char *file);

#endif
