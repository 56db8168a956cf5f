/* sdschat.sds._hugearena: Python's small-object arenas on transparent huge pages.
 *
 * A simulation keeps tens of thousands of engines in one process and touches
 * a different one with every copy of a frame it delivers: most of its memory
 * accesses miss the TLB, and on a virtual machine a miss costs a walk of two
 * page tables. Python's object allocator (pymalloc) takes its memory from the
 * operating system in arenas of 1 MiB, each its own mmap(); the kernel backs
 * them with 4 KiB pages unless told otherwise (THP in "madvise" mode).
 *
 * install() replaces the arena allocator of this process
 * (PyObject_SetArenaAllocator): arenas are carved, one after the other, from
 * regions of 64 MiB aligned on 2 MiB and advised MADV_HUGEPAGE, so the kernel
 * can back them with 2 MiB pages. An arena pymalloc gives back goes on a free
 * list and is handed out again (the memory stays with the process, as glibc's
 * heap does); an arena of the previous allocator (made before install) goes
 * back to it. Nothing else changes: objects, their layout and addresses
 * within an arena are pymalloc's.
 *
 * Only for a process that does nothing else (a simulation's worker): the
 * memory of freed arenas is not returned to the operating system.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <sys/mman.h>

#define REGION_BYTES ((size_t)64 << 20)
#define HUGE_BYTES ((size_t)2 << 20)

typedef struct chunk {
    struct chunk *next;
} chunk;

static PyObjectArenaAllocator previous;
static int installed = 0;
static size_t arena_bytes = 0;   /* the size pymalloc asks for (its ARENA_SIZE) */
static char *cursor = NULL, *region_end = NULL;
static chunk *free_arenas = NULL;
static uintptr_t lowest = UINTPTR_MAX, highest = 0;
static Py_ssize_t regions = 0, arenas_out = 0;

static void *
arena_alloc(void *ctx, size_t size)
{
    if (arena_bytes == 0) {
        arena_bytes = size;
    }
    if (size != arena_bytes || size > REGION_BYTES) {
        return previous.alloc(previous.ctx, size);
    }
    if (free_arenas != NULL) {
        chunk *c = free_arenas;
        free_arenas = c->next;
        arenas_out++;
        return c;
    }
    if (cursor == NULL || (size_t)(region_end - cursor) < size) {
        char *p = mmap(NULL, REGION_BYTES + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return previous.alloc(previous.ctx, size);
        }
        char *start = (char *)(((uintptr_t)p + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
        /* the unaligned head and tail are never touched: give them back */
        if (start > p) {
            munmap(p, (size_t)(start - p));
        }
        char *tail = start + REGION_BYTES;
        if (tail < p + REGION_BYTES + HUGE_BYTES) {
            munmap(tail, (size_t)(p + REGION_BYTES + HUGE_BYTES - tail));
        }
        madvise(start, REGION_BYTES, MADV_HUGEPAGE);  /* advice: if refused, 4 KiB pages as before */
        cursor = start;
        region_end = tail;
        regions++;
        if ((uintptr_t)start < lowest) {
            lowest = (uintptr_t)start;
        }
        if ((uintptr_t)tail > highest) {
            highest = (uintptr_t)tail;
        }
    }
    void *arena = cursor;
    cursor += size;
    arenas_out++;
    return arena;
}

static int
ours(void *ptr)
{
    /* between the first and the last region: one of ours, or (rarely) an arena of the previous allocator
       mapped between two of them, which is then kept and handed out again like ours (still mapped, of the
       same size): either way memory pymalloc may use again */
    return (uintptr_t)ptr >= lowest && (uintptr_t)ptr < highest;
}

static void
arena_free(void *ctx, void *ptr, size_t size)
{
    if (size == arena_bytes && ours(ptr)) {
        chunk *c = (chunk *)ptr;
        c->next = free_arenas;
        free_arenas = c;
        arenas_out--;
        return;
    }
    previous.free(previous.ctx, ptr, size);
}

static PyObject *
install(PyObject *self, PyObject *Py_UNUSED(args))
{
    if (!installed) {
        PyObjectArenaAllocator mine = {NULL, arena_alloc, arena_free};
        PyObject_GetArenaAllocator(&previous);
        PyObject_SetArenaAllocator(&mine);
        installed = 1;
    }
    Py_RETURN_NONE;
}

static PyObject *
stats(PyObject *self, PyObject *Py_UNUSED(args))
{
    return Py_BuildValue("{s:O,s:n,s:n,s:n}", "installed", installed ? Py_True : Py_False, "regions", regions,
                         "arenas", arenas_out, "arena_bytes", (Py_ssize_t)arena_bytes);
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS,
     "Carve this process's pymalloc arenas from 2 MiB-aligned regions advised MADV_HUGEPAGE (once; idempotent)."},
    {"stats", stats, METH_NOARGS, "{installed, regions (of 64 MiB), arenas (in use), arena_bytes}."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hugearena", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__hugearena(void)
{
    return PyModule_Create(&module);
}
