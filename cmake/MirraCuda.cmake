# MIRRA_CUDA=AUTO|ON|OFF: whether to build the CUDA backend. AUTO uses the CUDA toolkit, cuDNN and
# NCCL when all three are found (in /usr/local/cuda or on the default paths); ON requires them; OFF
# skips. Sets MIRRA_WITH_CUDA and, when on, enables the CUDA language (architectures default to 90,
# H100/H200, as SASS plus PTX; set CMAKE_CUDA_ARCHITECTURES to change) and defines the targets
# CUDA::cudart, CUDA::cublas, mirra_cudnn and mirra_nccl.
set(MIRRA_CUDA "AUTO" CACHE STRING "Build the CUDA path: AUTO, ON or OFF")
set_property(CACHE MIRRA_CUDA PROPERTY STRINGS AUTO ON OFF)
set(MIRRA_WITH_CUDA OFF)

if(NOT MIRRA_CUDA STREQUAL "OFF")
  set(_cuda_root /usr/local/cuda)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS ${_cuda_root}/bin/nvcc)
    set(CMAKE_CUDA_COMPILER ${_cuda_root}/bin/nvcc)
  endif()
  find_package(CUDAToolkit QUIET)
  find_path(MIRRA_CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cuda_root}/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(MIRRA_CUDNN_LIBRARY cudnn HINTS ${_cuda_root}/lib64 ${_cuda_root}/lib ${CUDAToolkit_LIBRARY_DIR})
  find_path(MIRRA_NCCL_INCLUDE_DIR nccl.h HINTS ${_cuda_root}/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(MIRRA_NCCL_LIBRARY nccl HINTS ${_cuda_root}/lib64 ${_cuda_root}/lib ${CUDAToolkit_LIBRARY_DIR})
  if(CUDAToolkit_FOUND AND MIRRA_CUDNN_INCLUDE_DIR AND MIRRA_CUDNN_LIBRARY AND MIRRA_NCCL_INCLUDE_DIR AND MIRRA_NCCL_LIBRARY)
    set(MIRRA_WITH_CUDA ON)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 dialect flag (nvcc 12 and later take it).
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    add_library(mirra_cudnn INTERFACE)
    target_include_directories(mirra_cudnn SYSTEM INTERFACE ${MIRRA_CUDNN_INCLUDE_DIR})
    target_link_libraries(mirra_cudnn INTERFACE ${MIRRA_CUDNN_LIBRARY})
    add_library(mirra_nccl INTERFACE)
    target_include_directories(mirra_nccl SYSTEM INTERFACE ${MIRRA_NCCL_INCLUDE_DIR})
    target_link_libraries(mirra_nccl INTERFACE ${MIRRA_NCCL_LIBRARY})
  elseif(MIRRA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MIRRA_CUDA=ON, but the CUDA toolkit, cuDNN or NCCL was not found "
                        "(toolkit: ${CUDAToolkit_FOUND}, cudnn: ${MIRRA_CUDNN_LIBRARY}, nccl: ${MIRRA_NCCL_LIBRARY})")
  endif()
endif()
message(STATUS "mirra: CUDA path ${MIRRA_WITH_CUDA} (MIRRA_CUDA=${MIRRA_CUDA})")
