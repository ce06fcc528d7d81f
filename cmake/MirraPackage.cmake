# `cpack -G DEB` in a build configured by scripts/package.sh: one Debian package, mirra_<version>_<arch>.deb,
# holding what `cmake --install` installs (the libraries, headers and CMake package, mirra.pc, the
# runner and mirra-examples, schemas, docs). Its dependencies: the library packages the binaries
# link against, found by dpkg-shlibdeps, and the -dev packages of the libraries mirra's headers and
# CMake package use. Debian has no CUDA 13, cuDNN 9 or NCCL 2.28, so the package is built without the
# CUDA backend.
set(CPACK_PACKAGE_NAME mirra)
set(CPACK_PACKAGE_VENDOR "mirra developers")
set(CPACK_PACKAGE_CONTACT "mirra developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION "mirra builds a computation graph once, rewrites it for the devices at hand \
with a strategy chosen by config (one_device, mirrored, central_storage, multi_worker_mirrored, \
parameter_server) and runs it \
on a oneTBB-scheduled dataflow executor. This package holds the C++ libraries and headers with their CMake \
package and pkg-config file, and the mirra runner.")
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The package's own libraries, for dpkg-shlibdeps to resolve the runner's links to them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_INSTALL_LIBDIR})
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libtbb-dev, libflatbuffers-dev")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openmpi-bin, dataset-fashion-mnist")
include(CPack)
