/* Switching between the emulator's fibers (emu.c): a context holds a
   suspended fiber (or the scheduler), fiber_context_init makes one that
   starts a function on a stack of its own, fiber_switch saves the running
   one and resumes another.

   glibc's swapcontext makes a system call on every switch, to save and
   restore the signal mask, which the emulator never changes: with
   getcontext it was about a third of the emulated tests' time
   (bench/results/2026-11-29-emulator-profile-3d82914.log). On x86-64 a
   switch here is the System V ABI's callee-saved registers, the SSE and x87
   control words and the stack pointer. Under the sanitizers, and on other
   machines, it is ucontext, whose switches ASan and TSan know. Included by
   emu.c alone: the x86-64 switch is defined here, once per library. */
#ifndef XENT_EMU_FIBER_SWITCH_H
#define XENT_EMU_FIBER_SWITCH_H

#include <stddef.h>
#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define XENT_EMU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define XENT_EMU_SANITIZED 1
#endif
#endif

#if defined(__x86_64__) && defined(__linux__) && !defined(XENT_EMU_SANITIZED)

/* The stack pointer of a suspended context; below it, the frame
   xent_emu_switch pushed (or fiber_context_init wrote). */
typedef struct fiber_context {
  void* sp;
} fiber_context;

/* Saves the running context's registers on its stack and its stack pointer
   in *save, then resumes the context whose stack pointer is to. */
__attribute__((visibility("hidden"))) void xent_emu_switch(void** save, void* to);

/* (pushsection/popsection: the compiler's own output resumes in the section
   it was in.) */
__asm__(
    ".pushsection .text\n"
    ".globl xent_emu_switch\n"
    ".hidden xent_emu_switch\n"
    ".type xent_emu_switch, @function\n"
    ".p2align 4\n"
    "xent_emu_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  subq $8, %rsp\n"
    "  stmxcsr (%rsp)\n"
    "  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n"
    "  fldcw 4(%rsp)\n"
    "  addq $8, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size xent_emu_switch, .-xent_emu_switch\n"
    /* A new context's first return lands here, with its function in r12
       and the stack 16-byte aligned: the call gives the function the
       alignment the ABI promises at entry. The function never returns. */
    ".type xent_emu_fiber_start, @function\n"
    ".p2align 4\n"
    "xent_emu_fiber_start:\n"
    "  callq *%r12\n"
    "  ud2\n"
    ".size xent_emu_fiber_start, .-xent_emu_fiber_start\n"
    ".popsection\n");

/* A context that runs entry (which must never return) on [stack, stack +
   size) when first switched to: the frame xent_emu_switch pops, written at
   the stack's top. */
static inline void fiber_context_init(fiber_context* c, char* stack, size_t size, void (*entry)(void)) {
  extern char xent_emu_fiber_start[] __attribute__((visibility("hidden")));
  uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
  uint64_t* frame = (uint64_t*)(top - 80);
  uint32_t mxcsr;
  uint16_t fpucw;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(fpucw));
  frame[0] = (uint64_t)mxcsr | ((uint64_t)fpucw << 32);
  frame[1] = 0;                             /* r15 */
  frame[2] = 0;                             /* r14 */
  frame[3] = 0;                             /* r13 */
  frame[4] = (uint64_t)(uintptr_t)entry;    /* r12: xent_emu_fiber_start calls it */
  frame[5] = 0;                             /* rbx */
  frame[6] = 0;                             /* rbp */
  frame[7] = (uint64_t)(uintptr_t)xent_emu_fiber_start; /* the return address, at top - 24 */
  c->sp = frame;
}

static inline void fiber_switch(fiber_context* from, fiber_context* to) { xent_emu_switch(&from->sp, to->sp); }

#else

#include <ucontext.h>

typedef struct fiber_context {
  ucontext_t uc;
} fiber_context;

/* Not inlined: getcontext returns twice, and a caller's loop variables may
   not stay in registers across it. */
static __attribute__((noinline)) void fiber_context_init(fiber_context* c, char* stack, size_t size,
                                                         void (*entry)(void)) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = NULL; /* entry never returns */
  makecontext(&c->uc, entry, 0);
}

static inline void fiber_switch(fiber_context* from, fiber_context* to) { swapcontext(&from->uc, &to->uc); }

#endif

#endif /* XENT_EMU_FIBER_SWITCH_H */
