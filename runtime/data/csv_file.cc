// CSV through libcsv's callbacks: the header, then every row's values parsed as numbers column by
// column; the columns made fields, alone or joined.
#include "runtime/data/csv_file.h"

#include <csv.h>

#include <charconv>
#include <set>

#include "runtime/data/mapped_file.h"

namespace mirra::runtime::data {

namespace {

struct Column {
  std::vector<double> reals;
  std::vector<int64_t> integers;
  bool integral = true;  // every value so far an integer
};

// The rows of one or more files with the same header, gathered by column.
class Table {
 public:
  explicit Table(const CsvOptions& options) : options_(options) {}

  graph::Status add(std::span<const std::byte> text, const std::string& name) {
    name_ = name;
    header_done_ = false;
    row_ = 0;
    csv_parser parser{};
    if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI) != 0) return graph::internal_error("libcsv could not start");
    csv_set_delim(&parser, static_cast<unsigned char>(options_.delimiter));
    const size_t parsed = csv_parse(&parser, text.data(), text.size(), on_value, on_row, this);
    const bool parse_failed = parsed != text.size() || csv_fini(&parser, on_value, on_row, this) != 0;
    const std::string reason = csv_strerror(csv_error(&parser));
    csv_free(&parser);
    MIRRA_RETURN_IF_ERROR(error_);
    if (parse_failed) {
      return graph::invalid_argument(name + ": malformed CSV after row " + std::to_string(row_) + " (" + reason + ")");
    }
    if (!header_done_) return graph::invalid_argument(name + ": empty (no header)");
    return graph::Status();
  }

  const std::vector<std::string>& header() const { return header_; }
  const std::vector<Column>& columns() const { return columns_; }
  int64_t rows() const { return rows_; }

 private:
  static void on_value(void* text, size_t length, void* self) {
    auto* table = static_cast<Table*>(self);
    table->values_.emplace_back(static_cast<const char*>(text), length);
  }
  static void on_row(int, void* self) {
    auto* table = static_cast<Table*>(self);
    if (table->error_.ok()) table->error_ = table->take_row();
    table->values_.clear();
  }

  graph::Status take_row() {
    if (!header_done_) {
      header_done_ = true;
      if (header_.empty()) {
        header_ = values_;
        columns_.resize(header_.size());
        std::set<std::string> seen;
        for (const std::string& column : header_) {
          if (column.empty()) return graph::invalid_argument(name_ + ": the header has an empty column name");
          if (!seen.insert(column).second) return graph::invalid_argument(name_ + ": the header names column '" + column + "' twice");
        }
      } else if (values_ != header_) {
        return graph::invalid_argument(name_ + ": its header differs from the first file's");
      }
      return graph::Status();
    }
    ++row_;
    if (values_.size() != header_.size()) {
      return graph::invalid_argument(name_ + ", row " + std::to_string(row_) + ": " + std::to_string(values_.size()) +
                                     " values, where the header has " + std::to_string(header_.size()) + " columns");
    }
    for (size_t c = 0; c < values_.size(); ++c) {
      const std::string& text = values_[c];
      const auto where = [&] { return name_ + ", row " + std::to_string(row_) + ", column '" + header_[c] + "'"; };
      if (text.empty()) return graph::invalid_argument(where() + ": empty (missing values are not read)");
      Column& column = columns_[c];
      const char* end = text.data() + text.size();
      int64_t integer = 0;
      const auto as_integer = std::from_chars(text.data(), end, integer);
      double real = 0;
      if (as_integer.ec == std::errc() && as_integer.ptr == end) {
        real = static_cast<double>(integer);
      } else {
        const auto as_real = std::from_chars(text.data(), end, real);
        if (as_real.ec != std::errc() || as_real.ptr != end) {
          return graph::invalid_argument(where() + ": '" + text + "' is not a number");
        }
        column.integral = false;
      }
      column.reals.push_back(real);
      column.integers.push_back(integer);
    }
    ++rows_;
    return graph::Status();
  }

  const CsvOptions& options_;
  std::string name_;
  std::vector<std::string> header_;
  std::vector<Column> columns_;
  std::vector<std::string> values_;  // of the row being read
  bool header_done_ = false;
  int64_t row_ = 0, rows_ = 0;
  graph::Status error_;
};

// The values of `columns`, row by row: [rows, columns].
template <class T>
std::vector<T> gather(const Table& table, const std::vector<size_t>& columns, std::vector<T> Column::*values) {
  const size_t width = columns.size();
  std::vector<T> out(static_cast<size_t>(table.rows()) * width);
  for (size_t k = 0; k < width; ++k) {
    const std::vector<T>& column = table.columns()[columns[k]].*values;
    for (size_t r = 0; r < column.size(); ++r) out[r * width + k] = column[r];
  }
  return out;
}

graph::Expected<std::shared_ptr<const ExampleSource>> make_source(const Table& table, const std::string& name,
                                                                  const CsvOptions& options) {
  const std::vector<std::string>& header = table.header();
  const auto column_index = [&](const std::string& column) -> graph::Expected<size_t> {
    for (size_t c = 0; c < header.size(); ++c) {
      if (header[c] == column) return c;
    }
    std::string names;
    for (const std::string& h : header) names += (names.empty() ? "" : ", ") + h;
    return graph::invalid_argument(name + " has no column '" + column + "' (its columns: " + names + ")");
  };
  // The fields in order: the joined ones, then every column no field joins, alone.
  std::vector<std::pair<std::string, std::vector<size_t>>> fields;
  std::set<size_t> joined;
  for (const auto& [field, columns] : options.fields) {
    if (columns.empty()) return graph::invalid_argument(name + ": field '" + field + "' joins no columns");
    std::vector<size_t> indices;
    for (const std::string& column : columns) {
      MIRRA_ASSIGN_OR_RETURN(const size_t c, column_index(column));
      if (!joined.insert(c).second) return graph::invalid_argument(name + ": column '" + column + "' is joined into two fields");
      indices.push_back(c);
    }
    fields.emplace_back(field, std::move(indices));
  }
  for (size_t c = 0; c < header.size(); ++c) {
    if (joined.count(c) != 0) continue;
    if (options.fields.count(header[c]) != 0) {
      return graph::invalid_argument(name + ": '" + header[c] + "' names both a column and a field joining others");
    }
    fields.push_back({header[c], {c}});
  }
  std::vector<ArrayField> arrays;
  const int64_t rows = table.rows();
  for (const auto& [field, columns] : fields) {
    bool integral = true;
    for (size_t c : columns) integral = integral && table.columns()[c].integral;
    const std::vector<int64_t> shape = columns.size() == 1 && options.fields.count(field) == 0
                                           ? std::vector<int64_t>{}
                                           : std::vector<int64_t>{static_cast<int64_t>(columns.size())};
    if (integral) {
      arrays.push_back(owned_array(Field{field, ElementType::i64, shape}, gather(table, columns, &Column::integers)));
    } else {
      arrays.push_back(owned_array(Field{field, ElementType::f64, shape}, gather(table, columns, &Column::reals)));
    }
  }
  MIRRA_ASSIGN_OR_RETURN(auto source, ArraySource::create(name, std::move(arrays), rows));
  return std::shared_ptr<const ExampleSource>(std::move(source));
}

}  // namespace

graph::Expected<std::shared_ptr<const ExampleSource>> csv_source(const std::vector<std::string>& paths, const CsvOptions& options) {
  if (paths.empty()) return graph::invalid_argument("a CSV data set needs at least one file");
  Table table(options);
  for (const std::string& path : paths) {
    MIRRA_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
    MIRRA_RETURN_IF_ERROR(table.add(file->bytes(), "CSV file '" + path + "'"));
  }
  const std::string name = paths.size() == 1 ? "CSV file '" + paths[0] + "'"
                                             : "CSV files '" + paths[0] + "' and " + std::to_string(paths.size() - 1) + " more";
  return make_source(table, name, options);
}

graph::Expected<std::shared_ptr<const ExampleSource>> csv_source_from_text(const std::string& text, const std::string& name,
                                                                           const CsvOptions& options) {
  Table table(options);
  MIRRA_RETURN_IF_ERROR(table.add(std::as_bytes(std::span(text.data(), text.size())), name));
  return make_source(table, name, options);
}

}  // namespace mirra::runtime::data
