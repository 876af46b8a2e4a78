// The object that carries a precompiled header of the tests (gradsync_test_pch in
// tests/CMakeLists.txt, failtest_pch in tests/compile_fail): CMake builds a target's header
// alongside its sources, so that target needs one.
