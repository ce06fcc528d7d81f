// CSV data sets: integer and floating columns, quoted values holding the delimiter and newlines,
// columns joined into fields, files read one after another; every malformed file refused naming the
// file, the row and the column.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "runtime/data/csv_file.h"

namespace mirra::runtime::data {
namespace {

std::shared_ptr<const ExampleSource> read(const std::string& text, const CsvOptions& options = {}) {
  auto source = csv_source_from_text(text, "t.csv", options);
  REQUIRE_MESSAGE(source.ok(), source.status().to_string());
  return *source;
}

template <class T>
T value(const ExampleSource& source, int64_t example, const std::string& field, int64_t k = 0) {
  const size_t f = source.field_index(field).value();
  T out[8];
  std::vector<std::byte*> targets(source.fields().size(), nullptr);
  targets[f] = reinterpret_cast<std::byte*>(out);
  REQUIRE(source.read(example, {}, targets).ok());
  return out[k];
}

TEST_CASE("Csv.columns_are_integer_or_floating_fields") {
  const auto source = read("id,price,\"size, m2\",rooms\n1,2.5,30,2\n2,-1e3,\"45\",3\n3,0.125,60,4\n");
  CHECK(source->size() == 3);
  REQUIRE(source->fields().size() == 4u);
  CHECK(source->fields()[0].to_string() == "id: i64[]");
  CHECK(source->fields()[1].to_string() == "price: f64[]");
  CHECK(source->fields()[2].to_string() == "size, m2: i64[]");
  CHECK(value<double>(*source, 1, "price") == -1000.0);
  CHECK(value<int64_t>(*source, 2, "rooms") == 4);
  CHECK(value<int64_t>(*source, 1, "size, m2") == 45);
}

TEST_CASE("Csv.fields_join_columns_in_the_order_named") {
  const auto source = read("y,x2,x1,label\n0.5,2,1,7\n1.5,4,3,8\n", {.fields = {{"inputs", {"x1", "x2"}}, {"target", {"y"}}}});
  REQUIRE(source->fields().size() == 3u);
  CHECK(source->fields()[0].to_string() == "inputs: i64[2]");
  CHECK(source->fields()[1].to_string() == "target: f64[1]");
  CHECK(source->fields()[2].to_string() == "label: i64[]");
  CHECK(value<int64_t>(*source, 1, "inputs", 0) == 3);
  CHECK(value<int64_t>(*source, 1, "inputs", 1) == 4);
  CHECK(value<double>(*source, 0, "target") == 0.5);
}

TEST_CASE("Csv.quoted_values_may_hold_newlines_and_quotes") {
  // A quoted header name with a newline and a doubled quote; values quoted or not.
  const auto source = read("\"a\nb\",\"c\"\"d\"\n\"1\",2\n3,\"4\"\n");
  CHECK(source->fields()[0].name == "a\nb");
  CHECK(source->fields()[1].name == "c\"d");
  CHECK(value<int64_t>(*source, 1, "c\"d") == 4);
}

TEST_CASE("Csv.files_follow_one_another_under_one_header") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("mirra_csv_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.csv") << "x,y\n1,2\n3,4\n";
  std::ofstream(dir / "b.csv") << "x,y\n5,6.5\n";
  std::ofstream(dir / "c.csv") << "y,x\n7,8\n";
  auto both = csv_source({(dir / "a.csv").string(), (dir / "b.csv").string()});
  REQUIRE(both.ok());
  CHECK((*both)->size() == 3);
  CHECK((*both)->fields()[1].to_string() == "y: f64[]");
  CHECK(value<double>(**both, 2, "y") == 6.5);
  CHECK(csv_source({(dir / "a.csv").string(), (dir / "c.csv").string()}).status().message() ==
        "CSV file '" + (dir / "c.csv").string() + "': its header differs from the first file's");
  std::filesystem::remove_all(dir);
}

std::string refusal(const std::string& text, const CsvOptions& options = {}) {
  auto source = csv_source_from_text(text, "t.csv", options);
  REQUIRE_FALSE(source.ok());
  CHECK(source.status().code() == graph::StatusCode::invalid_argument);
  return source.status().message();
}

TEST_CASE("Csv.malformed_files_are_refused_naming_the_row_and_column") {
  CHECK(refusal("") == "t.csv: empty (no header)");
  CHECK(refusal("a,b\n1,2\n3\n") == "t.csv, row 2: 1 values, where the header has 2 columns");
  CHECK(refusal("a,b\n1,\n") == "t.csv, row 1, column 'b': empty (missing values are not read)");
  CHECK(refusal("a,b\n1,2\n3,Paris\n") == "t.csv, row 2, column 'b': 'Paris' is not a number");
  CHECK(refusal("a,a\n1,2\n") == "t.csv: the header names column 'a' twice");
  CHECK(refusal("a,\n1,2\n") == "t.csv: the header has an empty column name");
  CHECK(refusal("a,b\n1,\"2\n").starts_with("t.csv: malformed CSV after row 0"));
  CHECK(refusal("a,b\n1,2\n", {.fields = {{"x", {"a", "c"}}}}) == "t.csv has no column 'c' (its columns: a, b)");
  CHECK(refusal("a,b\n1,2\n", {.fields = {{"x", {"a"}}, {"y", {"a", "b"}}}}) == "t.csv: column 'a' is joined into two fields");
  CHECK(refusal("a,b\n1,2\n", {.fields = {{"a", {"b"}}}}) == "t.csv: 'a' names both a column and a field joining others");
}

}  // namespace
}  // namespace mirra::runtime::data
