/*
 * broker.security._tlsread: the TLS read loop of broker/security/openssl_transport.py, in C.
 *
 * OpenSSL's SSL_read returns at most one TLS record per call, and librdkafka sends a 1 KiB
 * produce as 360-570 records per MB (many of 9-10 bytes). Driven from Python, each record costs
 * a cffi call (argument conversion, a pointer object, the GIL released and taken back) on top of
 * OpenSSL's own work: ~0.5 us of the ~0.85 us a record takes in a memory-BIO micro-benchmark.
 * This module runs the same loop in C: one Python call per read pass instead of one per record.
 *
 * It links against no OpenSSL. cryptography's wheel carries its own OpenSSL, statically linked
 * and not exported, so the addresses of SSL_read and SSL_get_error are taken from its cffi
 * binding (ffi.addressof) and handed to bind() once; read_into() then calls them through those
 * pointers with the SSL* of a connection (also an address from the same binding).
 *
 * Invariants: the GIL is held throughout (the broker's event loop is the only caller, and no
 * Python code runs between records); the buffer is held (PyBUF_WRITABLE) for the whole call and
 * only its first `got` bytes are written; the error code is read with SSL_get_error right after
 * the SSL_read that failed, before anything else touches the connection, as OpenSSL requires.
 * If the module is not built (no C compiler at install), the transport keeps its Python loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>

typedef int (*ssl_read_fn)(void *ssl, void *buf, int num);
typedef int (*ssl_get_error_fn)(const void *ssl, int ret);

static ssl_read_fn ssl_read = NULL;
static ssl_get_error_fn ssl_get_error = NULL;

static PyObject *bind(PyObject *self, PyObject *args) {
    unsigned long long read_addr, error_addr;
    if (!PyArg_ParseTuple(args, "KK:bind", &read_addr, &error_addr))
        return NULL;
    if (read_addr == 0 || error_addr == 0) {
        PyErr_SetString(PyExc_ValueError, "bind() needs the addresses of SSL_read and SSL_get_error");
        return NULL;
    }
    ssl_read = (ssl_read_fn)(uintptr_t)read_addr;
    ssl_get_error = (ssl_get_error_fn)(uintptr_t)error_addr;
    Py_RETURN_NONE;
}

static PyObject *read_into(PyObject *self, PyObject *args) {
    unsigned long long ssl_addr;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Kw*:read_into", &ssl_addr, &view))
        return NULL;
    if (ssl_read == NULL || ssl_get_error == NULL || ssl_addr == 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "read_into() before bind(), or a null SSL*");
        return NULL;
    }
    void *ssl = (void *)(uintptr_t)ssl_addr;
    char *p = view.buf;
    Py_ssize_t size = view.len, got = 0;
    int err = 0;
    while (got < size) {
        Py_ssize_t want = size - got;
        int n = ssl_read(ssl, p + got, want > INT_MAX ? INT_MAX : (int)want);
        if (n <= 0) {
            err = ssl_get_error(ssl, n);
            break;
        }
        got += n;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("ni", got, err);
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS,
     "bind(ssl_read_address, ssl_get_error_address): the OpenSSL functions read_into() calls."},
    {"read_into", read_into, METH_VARARGS,
     "read_into(ssl_address, buffer) -> (bytes, ssl_error): SSL_read record after record into the "
     "writable buffer until it is full or SSL_read stops; ssl_error is SSL_get_error's code then "
     "(0 if the buffer filled)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tlsread",
    "The TLS read loop of broker/security/openssl_transport.py in C (see _tlsread.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__tlsread(void) { return PyModule_Create(&module); }
