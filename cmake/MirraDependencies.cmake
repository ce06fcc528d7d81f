# Third-party libraries, all from Debian packages (scripts/setup.sh installs them).
find_package(TBB REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)
find_package(FlatBuffers REQUIRED)
find_library(MIRRA_OPENBLAS_LIBRARY NAMES openblas REQUIRED)
find_path(MIRRA_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES x86_64-linux-gnu/openblas-pthread openblas REQUIRED)
add_library(mirra_openblas INTERFACE)
target_link_libraries(mirra_openblas INTERFACE ${MIRRA_OPENBLAS_LIBRARY})
target_include_directories(mirra_openblas SYSTEM INTERFACE ${MIRRA_CBLAS_INCLUDE_DIR})
if(MIRRA_BUILD_TESTS)
  find_package(doctest REQUIRED)
endif()

# Debian's dnnl CMake config asks for OpenCL (its GPU runtime); mirra uses only the CPU engine, so it
# links the library directly.
find_library(MIRRA_DNNL_LIBRARY NAMES dnnl REQUIRED)
find_path(MIRRA_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
add_library(mirra_dnnl INTERFACE)
# oneDNN runs on OpenMP (libgomp); mirra sets the team size per oneTBB thread (ops/cpu/dnnl_engine.cc).
find_library(MIRRA_GOMP_LIBRARY NAMES gomp libgomp.so.1 REQUIRED)
target_link_libraries(mirra_dnnl INTERFACE ${MIRRA_DNNL_LIBRARY} ${MIRRA_GOMP_LIBRARY})
target_include_directories(mirra_dnnl SYSTEM INTERFACE ${MIRRA_DNNL_INCLUDE_DIR})
# MPI (OpenMPI from Debian): the workers of multi_worker_mirrored talk through it, and the all-reduce
# benchmark's peer is its MPI_Allreduce. A build without it has no multi-worker collective.
find_package(MPI COMPONENTS CXX)
if(MPI_CXX_FOUND)
  set(MIRRA_WITH_MPI ON)
else()
  set(MIRRA_WITH_MPI OFF)
endif()
