# CMake toolchain for Debian's aarch64 cross compiler (gcc-aarch64-linux-gnu) against the
# arm64 multiarch -dev packages (scripts/setup installs them; the foreign architecture is
# enabled there). Used by tests/arm64/vm.sh to build canopy and canopyd for the arm64 VM.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Multiarch: headers are shared in /usr/include, libraries live in /usr/lib/aarch64-linux-gnu.
# pkg-config must see only the arm64 .pc files (and the arch-independent ones).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
