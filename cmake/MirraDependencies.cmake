# Third-party libraries, from Debian packages (scripts/setup.sh installs them); oneDNN may come from
# elsewhere (MIRRA_ONEDNN_ROOT).
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
# TFRecord data sets: protobuf parses their Examples (runtime/data/example.proto), ISA-L computes their
# CRC-32C, libpng and libjpeg-turbo's TurboJPEG decode the images they hold.
find_package(Protobuf REQUIRED)
# The parameter-server strategy's tasks exchange values over gRPC (runtime/collectives/grpc_communicator.h).
find_package(gRPC CONFIG REQUIRED)
find_package(PNG REQUIRED)
find_library(MIRRA_ISAL_LIBRARY NAMES isal REQUIRED)
find_path(MIRRA_ISAL_INCLUDE_DIR isa-l/crc.h REQUIRED)
find_library(MIRRA_TURBOJPEG_LIBRARY NAMES turbojpeg REQUIRED)
find_path(MIRRA_TURBOJPEG_INCLUDE_DIR turbojpeg.h REQUIRED)
add_library(mirra_image_codecs INTERFACE)
target_link_libraries(mirra_image_codecs INTERFACE PNG::PNG ${MIRRA_TURBOJPEG_LIBRARY})
target_include_directories(mirra_image_codecs SYSTEM INTERFACE ${MIRRA_TURBOJPEG_INCLUDE_DIR})
add_library(mirra_isal INTERFACE)
target_link_libraries(mirra_isal INTERFACE ${MIRRA_ISAL_LIBRARY})
target_include_directories(mirra_isal SYSTEM INTERFACE ${MIRRA_ISAL_INCLUDE_DIR})
# libcsv (Debian's libcsv-dev): CSV data sets.
find_library(MIRRA_CSV_LIBRARY NAMES csv REQUIRED)
find_path(MIRRA_CSV_INCLUDE_DIR csv.h REQUIRED)
add_library(mirra_csv INTERFACE)
target_link_libraries(mirra_csv INTERFACE ${MIRRA_CSV_LIBRARY})
target_include_directories(mirra_csv SYSTEM INTERFACE ${MIRRA_CSV_INCLUDE_DIR})
# minizip (zlib's contrib; Debian's libminizip-dev): the .npz archives of NumPy data sets.
find_library(MIRRA_MINIZIP_LIBRARY NAMES minizip REQUIRED)
find_path(MIRRA_MINIZIP_INCLUDE_DIR unzip.h PATH_SUFFIXES minizip REQUIRED)
add_library(mirra_minizip INTERFACE)
target_link_libraries(mirra_minizip INTERFACE ${MIRRA_MINIZIP_LIBRARY})
target_include_directories(mirra_minizip SYSTEM INTERFACE ${MIRRA_MINIZIP_INCLUDE_DIR})
if(MIRRA_BUILD_TESTS)
  find_package(doctest REQUIRED)
endif()

# oneDNN: Debian's (2.6, on OpenMP), or the one under MIRRA_ONEDNN_ROOT (oneDNN 2.x or 3.x on OpenMP or
# oneTBB; scripts/onednn-wheel.sh unpacks Intel's oneTBB build from PyPI there). Debian's dnnl CMake
# config asks for OpenCL (its GPU runtime); mirra uses only the CPU engine, so it links the library
# directly.
set(MIRRA_ONEDNN_ROOT "" CACHE PATH "A oneDNN installation (include/, lib/) to build against instead of the system's")
if(MIRRA_ONEDNN_ROOT)
  find_library(MIRRA_DNNL_LIBRARY NAMES dnnl PATHS "${MIRRA_ONEDNN_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
  find_path(MIRRA_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp PATHS "${MIRRA_ONEDNN_ROOT}/include" NO_DEFAULT_PATH REQUIRED)
else()
  find_library(MIRRA_DNNL_LIBRARY NAMES dnnl REQUIRED)
  find_path(MIRRA_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
endif()
add_library(mirra_dnnl INTERFACE)
target_link_libraries(mirra_dnnl INTERFACE ${MIRRA_DNNL_LIBRARY})
target_include_directories(mirra_dnnl SYSTEM INTERFACE ${MIRRA_DNNL_INCLUDE_DIR})
# On OpenMP (libgomp), mirra sets each oneTBB thread's team size for its oneDNN calls
# (ops/cpu/dnnl_engine.cc).
file(STRINGS "${MIRRA_DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_config.h" MIRRA_DNNL_ON_OPENMP
     REGEX "#define DNNL_CPU_THREADING_RUNTIME DNNL_RUNTIME_OMP")
if(MIRRA_DNNL_ON_OPENMP)
  find_library(MIRRA_GOMP_LIBRARY NAMES gomp libgomp.so.1 REQUIRED)
  target_link_libraries(mirra_dnnl INTERFACE ${MIRRA_GOMP_LIBRARY})
endif()
# MPI (OpenMPI from Debian): the workers of multi_worker_mirrored talk through it, and the all-reduce
# benchmark's peer is its MPI_Allreduce. A build without it has no multi-worker collective.
find_package(MPI COMPONENTS CXX)
if(MPI_CXX_FOUND)
  set(MIRRA_WITH_MPI ON)
else()
  set(MIRRA_WITH_MPI OFF)
endif()
