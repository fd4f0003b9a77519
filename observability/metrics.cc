#include "observability/metrics.h"

#include <cmath>
#include <cstdio>

namespace geogate::observability {

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
  return kBuckets;
}

const std::vector<double>& TokenGapBuckets() {
  static const std::vector<double> kBuckets = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                               0.05,   0.1,   0.25,  0.5,   1,    5};
  return kBuckets;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

namespace {

void AppendLabelValue(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out.push_back(c);
  }
}

}  // namespace

void PromWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += help;
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void PromWriter::Sample(std::string_view name,
                        std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
                        double value) {
  out_ += name;
  if (labels.size() != 0) {
    out_ += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out_ += ',';
      first = false;
      out_ += k;
      out_ += "=\"";
      AppendLabelValue(out_, v);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

void PromWriter::SampleN(std::string_view name, const char* const* names, const std::string* values,
                         size_t n, double v, std::string_view extra_name,
                         std::string_view extra_value) {
  out_ += name;
  if (n != 0 || !extra_name.empty()) {
    out_ += '{';
    for (size_t i = 0; i < n; ++i) {
      if (i != 0) out_ += ',';
      out_ += names[i];
      out_ += "=\"";
      AppendLabelValue(out_, values[i]);
      out_ += '"';
    }
    if (!extra_name.empty()) {
      if (n != 0) out_ += ',';
      out_ += extra_name;
      out_ += "=\"";
      out_ += extra_value;
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatValue(v);
  out_ += '\n';
}

void PromWriter::HistogramSamples(std::string_view name, const char* const* names,
                                  const std::string* values, size_t n,
                                  const std::vector<double>& bounds, const HistogramData& d) {
  std::string bucket_name = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= bounds.size(); ++b) {
    cumulative += d.buckets[b];
    std::string le = b < bounds.size() ? FormatValue(bounds[b]) : "+Inf";
    SampleN(bucket_name, names, values, n, static_cast<double>(cumulative), "le", le);
  }
  SampleN(std::string(name) + "_sum", names, values, n, d.sum);
  SampleN(std::string(name) + "_count", names, values, n, static_cast<double>(d.count));
}

}  // namespace geogate::observability
