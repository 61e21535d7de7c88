/** The widget module's name and version; the kernel's widget names the same (widget.py). */
export const MODULE_NAME = 'memfit-jupyter';
export const MODULE_VERSION = '0.1.0';
