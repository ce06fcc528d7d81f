// CSV files with a header, as a data set: read with libcsv (quoted values, embedded delimiters and
// newlines), every value a number. Each column is a field of one value, integer (i64) when every value
// of it is one, else floating (f64); `fields` joins columns into a field of several values in the order
// named (the inputs of a regression), whose type is integer when all of its columns are. Several files
// must share the header; their rows follow one another. An empty value, one that is not a number, a row
// of another length, a damaged quote, a missing column are errors naming the file, the row (counted
// from 1 after the header) and the column.
//
//   auto source = csv_source({"houses.csv"}, {.fields = {{"inputs", {"rooms", "area"}}}});
//   // fields: inputs: f64[2], price: f64[]
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/status.h"
#include "runtime/data/example_source.h"

namespace mirra::runtime::data {

struct CsvOptions {
  std::map<std::string, std::vector<std::string>> fields;  // field -> its columns, in order
  char delimiter = ',';
};

graph::Expected<std::shared_ptr<const ExampleSource>> csv_source(const std::vector<std::string>& paths,
                                                                 const CsvOptions& options = {});
// The same from the text of one file, named `name` in errors (tests, fuzzing).
graph::Expected<std::shared_ptr<const ExampleSource>> csv_source_from_text(const std::string& text, const std::string& name,
                                                                           const CsvOptions& options = {});

}  // namespace mirra::runtime::data
