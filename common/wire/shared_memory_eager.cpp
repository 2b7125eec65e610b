#include "common/wire/shared_memory_eager.hpp"

#include <mpi.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

namespace gpusearch::wire {

namespace {

// What prefer_eager_shared_memory() set, for the metrics (one process, one MPI_Init).
std::vector<std::string>& names_set_here() {
  static std::vector<std::string> names;
  return names;
}

std::optional<std::size_t> parse_bytes(std::string_view text) {
  std::size_t v = 0;
  const auto* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc{} || p != end) return std::nullopt;
  return v;
}

// A scalar control variable's value, by name, as JSON (an enumeration's as its item's name);
// nullopt where this MPI has no such variable or it is not a single value.
std::optional<nlohmann::json> read_control_variable(const char* wanted) {
  int index = 0;
  if (MPI_T_cvar_get_index(wanted, &index) != MPI_SUCCESS) return std::nullopt;
  char name[256];
  char description[1024];
  int name_len = sizeof name, description_len = sizeof description;
  int verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype = MPI_T_ENUM_NULL;
  if (MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype, description,
                          &description_len, &bind, &scope) != MPI_SUCCESS ||
      bind != MPI_T_BIND_NO_OBJECT)
    return std::nullopt;
  MPI_T_cvar_handle handle;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS)
    return std::nullopt;
  alignas(8) unsigned char value[64] = {};
  const bool read = count == 1 && MPI_T_cvar_read(handle, value) == MPI_SUCCESS;
  MPI_T_cvar_handle_free(&handle);
  if (!read) return std::nullopt;
  auto as = [&value]<typename T>(T) {
    T v;
    std::memcpy(&v, value, sizeof v);
    return v;
  };
  if (type == MPI_INT && enumtype != MPI_T_ENUM_NULL) {
    const int v = as(0);
    int items = 0;
    char enum_name[256];
    int enum_name_len = sizeof enum_name;
    if (MPI_T_enum_get_info(enumtype, &items, enum_name, &enum_name_len) == MPI_SUCCESS)
      for (int i = 0; i < items; ++i) {
        int item_value = 0;
        char item[256];
        int item_len = sizeof item;
        if (MPI_T_enum_get_item(enumtype, i, &item_value, item, &item_len) == MPI_SUCCESS &&
            item_value == v)
          return nlohmann::json(std::string(item));
      }
    return nlohmann::json(v);
  }
  if (type == MPI_INT) return nlohmann::json(as(0));
  if (type == MPI_UNSIGNED) return nlohmann::json(as(0U));
  if (type == MPI_UNSIGNED_LONG) return nlohmann::json(as(0UL));
  if (type == MPI_UNSIGNED_LONG_LONG) return nlohmann::json(as(0ULL));
  if (type == MPI_LONG_LONG) return nlohmann::json(as(0LL));
  if (type == MPI_COUNT) return nlohmann::json(as(MPI_Count{}));
  return std::nullopt;
}

}  // namespace

std::size_t shm_eager_bytes_in(int argc, char** argv) {
  const std::string_view flag = kShmEagerFlag;
  std::optional<std::string_view> text;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == flag && i + 1 < argc) text = argv[i + 1];
    else if (a.size() > flag.size() && a.starts_with(flag) && a[flag.size()] == '=')
      text = a.substr(flag.size() + 1);
  }
  if (!text || !shm_eager_bytes_problem(*text).empty()) return kDefaultShmEagerBytes;
  return *parse_bytes(*text);
}

std::string shm_eager_bytes_problem(std::string_view text) {
  const auto v = parse_bytes(text);
  if (!v) return "not a whole number of bytes: " + std::string(text);
  if (*v == 0 || (*v >= kMinShmEagerBytes && *v <= kMaxShmEagerBytes)) return "";
  return "must be 0 (Open MPI's own settings) or from " + std::to_string(kMinShmEagerBytes) +
         " to " + std::to_string(kMaxShmEagerBytes);
}

std::vector<std::pair<std::string, std::string>> shm_eager_parameters(
    std::size_t eager_bytes, std::uint64_t shm_budget_bytes) {
  // Less shared memory than Open MPI's own 4 MiB segment: leave its settings alone.
  if (eager_bytes == 0 || shm_budget_bytes < (std::uint64_t{4} << 20)) return {};
  // A sender's eager fragments are taken from its own segment; the free list grows by dozens of
  // fragments at a time, so the segment holds 64 of them (measured on the build machine: 1 MiB
  // fragments in a 16 MiB segment fell back to the rendezvous, in 20 MiB they did not; hence
  // kMinFragmentsPerSegment). Open MPI reads the size as an int.
  std::uint64_t segment = std::clamp<std::uint64_t>(64 * std::uint64_t(eager_bytes),
                                                     std::uint64_t{4} << 20, std::uint64_t{1} << 30);
  // A small /dev/shm (a container's 64 MiB) bounds the segment, and the segment the limit.
  segment = std::min(segment, shm_budget_bytes);
  std::uint64_t eager = eager_bytes;
  if (segment < kMinFragmentsPerSegment * eager)  // at least 4 MiB / 24: 168 KiB
    eager = segment / kMinFragmentsPerSegment / 4096 * 4096;
  return {{"btl_vader_eager_limit", std::to_string(eager)},
          {"btl_vader_segment_size", std::to_string(segment)}};
}

std::uint64_t shared_memory_budget_bytes() {
  // Open MPI's backing directory (default /dev/shm), shared by the node's ranks: each takes at
  // most half its share of the free space (mpirun tells each rank the node's rank count).
  const char* dir = std::getenv("OMPI_MCA_btl_vader_backing_directory");
  struct statvfs fs {};
  if (::statvfs(dir && *dir ? dir : "/dev/shm", &fs) != 0) return UINT64_MAX;
  const std::uint64_t free_bytes = std::uint64_t(fs.f_bavail) * fs.f_frsize;
  std::uint64_t ranks = 1;
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    ranks = std::max<std::uint64_t>(1, std::strtoull(local, nullptr, 10));
  return free_bytes / ranks / 2;
}

std::vector<std::string> prefer_eager_shared_memory(std::size_t eager_bytes) {
  // Open MPI 5 renamed vader to sm and keeps the old names as synonyms: a value the user gave
  // under either name is theirs.
  auto user_set = [](const std::string& name) {
    std::string twin = name;
    twin.replace(twin.find("vader"), 5, "sm");
    return std::getenv(("OMPI_MCA_" + name).c_str()) || std::getenv(("OMPI_MCA_" + twin).c_str());
  };
  std::vector<std::string> set;
  // The segment is sized for our eager limit: a user's own limit keeps Open MPI's sizes too.
  if (!user_set("btl_vader_eager_limit"))
    for (const auto& [name, value] :
         shm_eager_parameters(eager_bytes, eager_bytes ? shared_memory_budget_bytes() : 0))
      if (!user_set(name) && ::setenv(("OMPI_MCA_" + name).c_str(), value.c_str(), 0) == 0)
        set.push_back(name);
  names_set_here() = set;
  return set;
}

nlohmann::json shared_memory_transport_json() {
  nlohmann::json j = nlohmann::json::object();
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return j;
  for (const char* name : {"btl_vader_eager_limit", "btl_vader_max_send_size",
                           "btl_vader_segment_size", "btl_vader_single_copy_mechanism"})
    if (auto v = read_control_variable(name))
      j[std::string(name).substr(std::strlen("btl_vader_"))] = std::move(*v);
  MPI_T_finalize();
  j["set_by_gpusearch"] = names_set_here();
  return j;
}

}  // namespace gpusearch::wire
