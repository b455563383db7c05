// cairn._cairn: the C API (include/cairn/cairn.h) for Python, one function per C call, built with
// pybind11. Each function returns the C return code (with its outputs), and the Python layer
// (cairn/session.py) turns codes into exceptions, keeps the protected buffers alive and gives the API
// its Python shape. What only C can do is here: mpi4py communicators to MPI_Comm (mpi4py's C API),
// a buffer's address, the resize callback's trampoline, and releasing the GIL around collective calls.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mpi.h>
#include <mpi4py/mpi4py.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cairn/cairn.h"
#include "cairn/cairn_device.h"

namespace py = pybind11;

namespace {

// (kind, global_count, block_size, rows, cols): cairn.Distribution.as_tuple().
using DistTuple = std::tuple<int, size_t, size_t, size_t, size_t>;

cairn_distribution to_c(const DistTuple& d) {
  cairn_distribution c{};
  c.kind = std::get<0>(d);
  c.global_count = std::get<1>(d);
  c.block_size = std::get<2>(d);
  c.rows = std::get<3>(d);
  c.cols = std::get<4>(d);
  return c;
}

// mpi4py's C API is imported on first use, not when this module loads: importing mpi4py.MPI
// initializes MPI, which `import cairn` alone (cairn plot, cairn.__version__) must not do.
MPI_Comm to_comm(const py::object& comm) {
  if (comm.is_none()) return MPI_COMM_NULL;
  static bool imported = false;
  if (!imported) {
    if (import_mpi4py() < 0) throw py::error_already_set();
    imported = true;
  }
  if (!PyObject_TypeCheck(comm.ptr(), &PyMPIComm_Type))
    throw py::type_error("expected an mpi4py communicator (mpi4py.MPI.Comm), got " +
                         std::string(py::str(py::type::of(comm).attr("__name__"))));
  MPI_Comm* c = PyMPIComm_Get(comm.ptr());
  if (!c) throw py::error_already_set();
  return *c;
}

// The address of a writable contiguous buffer. The caller (session.py) holds a memoryview of the
// object for as long as cairn may use the address, so the export outlives this request.
void* address_of(const py::buffer& b) {
  Py_buffer view;
  if (PyObject_GetBuffer(b.ptr(), &view, PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS) != 0) throw py::error_already_set();
  void* ptr = view.buf;
  PyBuffer_Release(&view);
  return ptr;
}

// ---- DLPack (the struct layout of dlpack.h, stable since its version 0.5) --------------------------------
struct DLDevice {
  int32_t device_type;  // 1 CPU, 2 CUDA, 3 CUDA host, 13 CUDA managed, ...
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

// What a "dltensor" capsule describes, without consuming it (its owner frees it with the capsule):
// (address, device_type, device_id, dtype code, bits, lanes, shape, strides or None).
py::tuple dlpack_info(const py::capsule& capsule) {
  if (std::string(capsule.name() ? capsule.name() : "") != "dltensor")
    throw py::type_error("expected an unused DLPack capsule named 'dltensor'");
  auto* t = static_cast<DLManagedTensor*>(capsule.get_pointer());
  const DLTensor& d = t->dl_tensor;
  py::list shape, strides;
  for (int i = 0; i < d.ndim; ++i) shape.append(d.shape[i]);
  py::object st = py::none();
  if (d.strides) {
    for (int i = 0; i < d.ndim; ++i) strides.append(d.strides[i]);
    st = strides;
  }
  auto address = reinterpret_cast<uintptr_t>(static_cast<char*>(d.data) + d.byte_offset);
  return py::make_tuple(address, d.device.device_type, d.device.device_id, d.dtype.code, d.dtype.bits, d.dtype.lanes,
                        shape, st);
}

// ---- the resize callback ---------------------------------------------------------------------------

// An exception raised by a Python resize callback, kept until the C call that ran it returns (a raw
// reference: a static py::object would be released after the interpreter is gone).
PyObject* pending_exception = nullptr;

// cairn_resize_fn: user_data is the Python callable (kept alive by the Session). It returns a
// buffer of at least new_count elements (session.py checks it and keeps a memoryview of it), or
// raises: then cairn gets NULL (CAIRN_ERR_NO_MEMORY) and the exception is handed back to Python.
void* resize_trampoline(const char* name, size_t new_count, void* user_data) {
  py::gil_scoped_acquire gil;
  try {
    py::object fn = py::reinterpret_borrow<py::object>(static_cast<PyObject*>(user_data));
    py::object result = fn(std::string(name), new_count);
    if (result.is_none()) return nullptr;
    return address_of(result);
  } catch (py::error_already_set& e) {
    py::object value = e.value();
    if (!pending_exception) pending_exception = value.release().ptr();
  } catch (const std::exception& e) {
    if (!pending_exception) pending_exception = PyObject_CallFunction(PyExc_RuntimeError, "s", e.what());
  }
  return nullptr;
}

// Runs a C call that may call the resize callback: without the GIL, then returns (rc, exception or None).
template <class F>
py::tuple with_callbacks(F&& call) {
  Py_CLEAR(pending_exception);
  int rc;
  {
    py::gil_scoped_release nogil;
    rc = call();
  }
  py::object exc = pending_exception ? py::reinterpret_steal<py::object>(pending_exception) : py::none();
  pending_exception = nullptr;
  return py::make_tuple(rc, exc);
}

// Labels are at most 255 bytes (cairn_start_output refuses longer ones).
constexpr size_t kLabelBuffer = 256;

}  // namespace

PYBIND11_MODULE(_cairn, m) {
  m.doc() = "cairn's C API, one function per call, returning its code (see cairn.Session for the Python API)";
  m.attr("VERSION") = py::make_tuple(CAIRN_VERSION_MAJOR, CAIRN_VERSION_MINOR, CAIRN_VERSION_PATCH);
  py::dict types;
  for (auto [name, value] : {std::pair{"BYTE", CAIRN_BYTE}, {"CHAR", CAIRN_CHAR}, {"INT", CAIRN_INT},
                             {"INT32", CAIRN_INT32}, {"INT64", CAIRN_INT64}, {"UINT32", CAIRN_UINT32},
                             {"UINT64", CAIRN_UINT64}, {"FLOAT", CAIRN_FLOAT}, {"DOUBLE", CAIRN_DOUBLE},
                             {"LONG", CAIRN_LONG}, {"COMPLEX_FLOAT", CAIRN_COMPLEX_FLOAT},
                             {"COMPLEX_DOUBLE", CAIRN_COMPLEX_DOUBLE}})
    types[name] = static_cast<int>(value);
  m.attr("TYPES") = types;
  py::dict levels;
  for (auto [name, value] : {std::pair{"NONE", CAIRN_LEVEL_NONE}, {"L1", CAIRN_LEVEL_L1}, {"L2", CAIRN_LEVEL_L2},
                             {"L3", CAIRN_LEVEL_L3}})
    levels[name] = static_cast<int>(value);
  m.attr("LEVELS") = levels;
  py::dict dists;
  for (auto [name, value] : {std::pair{"PRIVATE", CAIRN_DIST_PRIVATE}, {"REPLICATED", CAIRN_DIST_REPLICATED},
                             {"BLOCK", CAIRN_DIST_BLOCK}, {"BLOCK_CYCLIC", CAIRN_DIST_BLOCK_CYCLIC},
                             {"BLOCK_ROWS", CAIRN_DIST_BLOCK_ROWS}, {"BLOCK_COLS", CAIRN_DIST_BLOCK_COLS}})
    dists[name] = static_cast<int>(value);
  m.attr("DIST_KINDS") = dists;

  m.def("strerror", [](int code) { return std::string(cairn_strerror(code)); }, py::arg("code"));
  m.def("last_error", [] { return std::string(cairn_last_error()); });

  m.def("init", [](const py::object& comm, std::optional<std::string> config) {
    MPI_Comm c = to_comm(comm);
    py::gil_scoped_release nogil;
    return cairn_init(c, config ? config->c_str() : nullptr);
  }, py::arg("comm"), py::arg("config") = py::none());
  m.def("finalize", [] { return cairn_finalize(); }, py::call_guard<py::gil_scoped_release>());

  m.def("protect", [](const std::string& name, const py::buffer& buffer, size_t count, int type,
                      std::optional<DistTuple> dist) {
    void* ptr = address_of(buffer);
    if (!dist) return cairn_protect(name.c_str(), ptr, count, static_cast<cairn_type>(type));
    cairn_distribution d = to_c(*dist);
    return cairn_protect_distributed(name.c_str(), ptr, count, static_cast<cairn_type>(type), &d);
  }, py::arg("name"), py::arg("buffer"), py::arg("count"), py::arg("type"), py::arg("dist") = py::none());
  // Device memory (cairn_device.h): the address of a __cuda_array_interface__ or DLPack object.
  m.def("protect_address", [](const std::string& name, uintptr_t address, size_t count, int type,
                              std::optional<DistTuple> dist) {
    void* ptr = reinterpret_cast<void*>(address);
    if (!dist) return cairn_protect(name.c_str(), ptr, count, static_cast<cairn_type>(type));
    cairn_distribution d = to_c(*dist);
    return cairn_protect_distributed(name.c_str(), ptr, count, static_cast<cairn_type>(type), &d);
  }, py::arg("name"), py::arg("address"), py::arg("count"), py::arg("type"), py::arg("dist") = py::none());
  m.def("dlpack_info", &dlpack_info, py::arg("capsule"));
  m.def("device_stream", [](uintptr_t stream) { return cairn_device_stream(reinterpret_cast<void*>(stream)); },
        py::arg("stream"));
  m.def("device_wait_copied", [](uintptr_t stream) {
    return cairn_device_wait_copied(reinterpret_cast<void*>(stream));
  }, py::arg("stream"), py::call_guard<py::gil_scoped_release>());
  m.def("device_copied_event", [] {
    void* e = nullptr;
    int rc = cairn_device_copied_event(&e);
    return py::make_tuple(rc, reinterpret_cast<uintptr_t>(e));
  });
  m.def("unprotect", [](const std::string& name) { return cairn_unprotect(name.c_str()); }, py::arg("name"));
  m.def("checkpoint", [] { return cairn_checkpoint(); }, py::call_guard<py::gil_scoped_release>());
  m.def("wait", [] { return cairn_wait(); }, py::call_guard<py::gil_scoped_release>());
  m.def("restart_available", [] {
    int available = 0, version = 0;
    int rc = cairn_restart_available(&available, &version);
    return std::make_tuple(rc, available != 0, version);
  }, py::call_guard<py::gil_scoped_release>());
  m.def("restart", [] { return with_callbacks([] { return cairn_restart(); }); });
  m.def("restart_level", [] {
    int version = 0, level = 0;
    int rc = cairn_restart_level(&version, &level);
    return std::make_tuple(rc, version, level);
  });

  m.def("local_count", [](const DistTuple& dist) {
    cairn_distribution d = to_c(dist);
    size_t count = 0;
    int rc = cairn_local_count(&d, &count);
    return std::make_tuple(rc, count);
  }, py::arg("dist"));
  m.def("set_resize", [](const std::string& name, const py::object& fn) {
    if (fn.is_none()) return cairn_set_resize(name.c_str(), nullptr, nullptr);
    return cairn_set_resize(name.c_str(), resize_trampoline, fn.ptr());
  }, py::arg("name"), py::arg("fn"));
  m.def("redistribute", [](const py::object& comm) {
    MPI_Comm c = to_comm(comm);
    return with_callbacks([c] { return cairn_redistribute(c); });
  }, py::arg("comm"));

  // Local and idempotent, so it is simply called again with a larger buffer on CAIRN_ERR_TRUNCATED.
  m.def("route_file", [](const std::string& name) {
    std::vector<char> buffer(4096);
    for (;;) {
      buffer[0] = '\0';
      int rc = cairn_route_file(name.c_str(), buffer.data(), buffer.size());
      if (rc != CAIRN_ERR_TRUNCATED || buffer.size() >= (1u << 24)) return std::make_tuple(rc, std::string(buffer.data()));
      buffer.resize(buffer.size() * 4);
    }
  }, py::arg("name"));
  m.def("start_output", [](std::optional<std::string> label, int flags) {
    py::gil_scoped_release nogil;
    return cairn_start_output(label ? label->c_str() : nullptr, flags);
  }, py::arg("label") = py::none(), py::arg("flags") = 0);
  m.def("complete_output", [](bool valid) { return cairn_complete_output(valid ? 1 : 0); }, py::arg("valid"),
        py::call_guard<py::gil_scoped_release>());
  m.def("have_restart", [] {
    int available = 0;
    char label[kLabelBuffer] = "";
    int rc = cairn_have_restart(&available, label, sizeof label);
    return std::make_tuple(rc, available != 0, std::string(label));
  }, py::call_guard<py::gil_scoped_release>());
  m.def("start_restart", [] {
    char label[kLabelBuffer] = "";
    int rc = cairn_start_restart(label, sizeof label);
    return std::make_tuple(rc, std::string(label));
  }, py::call_guard<py::gil_scoped_release>());
  m.def("complete_restart", [](bool valid) { return cairn_complete_restart(valid ? 1 : 0); }, py::arg("valid"),
        py::call_guard<py::gil_scoped_release>());

  m.def("need_checkpoint", [] {
    int flag = 0;
    int rc = cairn_need_checkpoint(&flag);
    return std::make_tuple(rc, flag != 0);
  }, py::call_guard<py::gil_scoped_release>());
  m.def("probe_agents", [] {
    int changed = 0;
    int rc = cairn_probe_agents(&changed);
    return std::make_tuple(rc, changed != 0);
  }, py::call_guard<py::gil_scoped_release>());
  m.def("should_exit", [] {
    int flag = 0;
    int rc = cairn_should_exit(&flag);
    return std::make_tuple(rc, flag != 0);
  }, py::call_guard<py::gil_scoped_release>());
}
