/* --version of every program: one version for the whole toolchain, made by the
 * Makefile from the VERSION file and, in a git checkout, `git describe`. */
#include <stdio.h>
#include <stdlib.h>
#include "cli.h"
#include "hc_version.h"

void hc_version(void)
{
    printf("%s %s\n", hc_prog, HC_VERSION);
    exit(0);
}
