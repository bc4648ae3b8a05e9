# The installable package, included at the end of the top-level
# CMakeLists.txt:
#
#   lib/libpmindex.a
#   include/pmindex/*.h                 the user API and the generated version.h
#   lib/cmake/pmindex/                  find_package(pmindex CONFIG): pmindex::pmindex
#   lib/pkgconfig/pmindex.pc            pkg-config --cflags --libs pmindex
#
# (lib/ is CMAKE_INSTALL_LIBDIR, e.g. lib/x86_64-linux-gnu under /usr.)
#
# An ordinary link of the archive keeps every index kind: the user API
# reaches the registry, whose first use calls each kind's registration
# function by name (src/index/builtin.cc). pmindex.pc's Libs is a plain
# -lpmindex.
#
# Dependencies, as the build found them: Threads; Abseil's absl::btree
# when the absl-btree reference index is built; libnuma when found.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PMINDEX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pmindex)
set(PMINDEX_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# What users link. In-tree it is also available as pmindex::pmindex (a
# project that add_subdirectory()s pmindex).
# The public headers use std::span: consumers compile as C++20 at least.
target_compile_features(pmindex PUBLIC cxx_std_20)
add_library(pmindex::pmindex ALIAS pmindex)

install(TARGETS pmindex EXPORT pmindex-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pmindex ${PROJECT_BINARY_DIR}/include/pmindex
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT pmindex-targets NAMESPACE pmindex:: DESTINATION ${PMINDEX_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pmindex-config.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/pmindex-config.cmake
                              INSTALL_DESTINATION ${PMINDEX_CMAKE_DIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/pmindex-config-version.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/pmindex-config.cmake
              ${PROJECT_BINARY_DIR}/cmake/pmindex-config-version.cmake
        DESTINATION ${PMINDEX_CMAKE_DIR})

# pmindex.pc. Its prefix is found from the .pc file's own place, so that
# `cmake --install --prefix DIR` (which does not reconfigure) gets a
# correct file. The dependencies go in Requires/Libs, not the .private
# fields: the library is only a static archive, so every consumer links them.
file(RELATIVE_PATH PMINDEX_PC_TO_PREFIX /pmindex-prefix/${PMINDEX_PKGCONFIG_DIR} /pmindex-prefix)
string(REGEX REPLACE "/$" "" PMINDEX_PC_TO_PREFIX "${PMINDEX_PC_TO_PREFIX}")
set(PMINDEX_PC_REQUIRES "")
set(PMINDEX_PC_LIBS "")
if(PMINDEX_HAVE_ABSL)
  list(APPEND PMINDEX_PC_REQUIRES absl_btree)
endif()
if(NUMA_LIBRARY AND NUMA_INCLUDE_DIR)
  list(APPEND PMINDEX_PC_LIBS -lnuma)
endif()
list(APPEND PMINDEX_PC_LIBS -pthread)
list(JOIN PMINDEX_PC_REQUIRES ", " PMINDEX_PC_REQUIRES)
list(JOIN PMINDEX_PC_LIBS " " PMINDEX_PC_LIBS)
configure_file(${PROJECT_SOURCE_DIR}/cmake/pmindex.pc.in ${PROJECT_BINARY_DIR}/pmindex.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pmindex.pc DESTINATION ${PMINDEX_PKGCONFIG_DIR})

# The test: tests/install/ builds README.md's usage example against a fresh
# install, by find_package and by pkg-config. Not under the sanitizers (the
# outside build would need their flags and runtime).
string(TOUPPER "${CMAKE_BUILD_TYPE}" PMINDEX_BUILD_TYPE_UPPER)
if(PMINDEX_BUILD_TESTS AND PMINDEX_BUILD_TYPE_UPPER MATCHES "^(RELEASE|RELWITHDEBINFO|DEBUG)$")
  add_test(NAME install_package
           COMMAND bash ${PROJECT_SOURCE_DIR}/tests/install/run.sh ${CMAKE_COMMAND}
                   ${PROJECT_BINARY_DIR} ${CMAKE_CXX_COMPILER} ${CMAKE_GENERATOR} ${PROJECT_VERSION})
  set_tests_properties(install_package PROPERTIES LABELS unit TIMEOUT 300)
endif()
