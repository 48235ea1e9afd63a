// Internal helpers shared by the filter, test and builtin files of the Jinja interpreter.
#pragma once

#include <string>

#include "jinja/interpreter.h"

namespace hinge::jinja {

// jinja2's attribute getter: "a.b.0" looks up item a, then b, then index 0.
Value attr_path(Interpreter& in, const Value& obj, const std::string& path);
int64_t arg_int(const Value* v, int64_t def, const char* filter);
bool arg_bool(const Value* v, bool def);
std::string ascii_lower(std::string s);
std::string ascii_upper(std::string s);
std::string py_capitalize(const std::string& s);
std::string jinja_title(const std::string& s);
// Python str.replace (count < 0: all).
std::string py_replace(const std::string& s, const std::string& old, const std::string& with,
                       int64_t count);
// Python len(): strings in code points; undefined is 0; a TypeError for generators and scalars.
int64_t py_len(const Value& v);
// Python's "%" string formatting for %s %r %d %i %f %% (the `format` filter).
std::string percent_format(const std::string& fmt, const List& args);
// The less common filters (jinja/filters_more.cpp); unknown names are errors.
Value apply_filter_more(Interpreter& in, const std::string& name, const Value& input,
                        CallArgs& args);

}  // namespace hinge::jinja
