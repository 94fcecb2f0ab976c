// SPDX-License-Identifier: Apache-2.0
// Empty: the target that owns a precompiled header needs one source file (see cmake/pch.cmake).
