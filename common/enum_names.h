// A table of an enum's names, and the two look-ups every such table needs:
// value -> name and name -> value. Header-only, so any layer can use it.
#pragma once

#include <cstddef>
#include <string>

namespace hedgedb {

template <typename Enum>
struct EnumName {
  Enum value;
  const char* name;
};

// The name of `value` in `table`, "unknown" when it has none.
template <typename Enum, size_t N>
const char* NameOfEnum(const EnumName<Enum> (&table)[N], Enum value) {
  for (const auto& e : table)
    if (e.value == value) return e.name;
  return "unknown";
}

// Sets *value to the entry named `name`; false (and *value unchanged) when
// the table has no such name.
template <typename Enum, size_t N>
bool ParseEnumName(const EnumName<Enum> (&table)[N], const std::string& name, Enum* value) {
  for (const auto& e : table) {
    if (name == e.name) {
      *value = e.value;
      return true;
    }
  }
  return false;
}

}  // namespace hedgedb
