/* The binary's entry, callable again by `vgpu shell` for each command line. */
#ifndef VGPU_CMD_MAIN_H
#define VGPU_CMD_MAIN_H

int vgpu_main(int argc, char **argv);

#endif
