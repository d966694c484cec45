# runtime/: the OpenCL kernels (runtime/opencl/kernels/NAME.cl) as C strings
# hc_cl_NAME_source, so they stay OpenCL C files (highlighted, read, linted)
# and the programs need no file beside them at run time.
$(O)/gen/%_cl.c: runtime/opencl/kernels/%.cl
	@mkdir -p $(dir $@)
	{ echo '/* made by runtime/module.mk from $< */'; echo 'const char hc_cl_$*_source[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } > $@.tmp && mv $@.tmp $@
# kept for reading (and for the compiler's line numbers) after the build
.PRECIOUS: $(O)/gen/%_cl.c
