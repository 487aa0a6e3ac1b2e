// SPDX-License-Identifier: MIT
/*
 * fork_threads.cu - a threaded CUDA program that forks: four threads
 * cudaMalloc and cudaFree 1 MiB blocks in a loop while the main thread
 * forks FORKS times; each child calls cudaMalloc once and exits with its
 * result.  The CUDA runtime refuses CUDA in a forked child (an
 * initialization error); under vmmx-run the child must get the same
 * refusal at once, never hang on a lock a parent thread held at the fork,
 * and never get a parent's pointer.
 *
 * Prints "fork_threads: N forks, children: K refused (code C), H hung,
 * G got memory" and exits 0 when every child was refused and none hung.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FORKS 20
#define THREADS 4
#define CHILD_SECONDS 10

static volatile int stop;
static volatile int thread_errors;

static void *worker(void *arg)
{
	(void)arg;
	while (!stop) {
		void *p = NULL;

		if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess)
			__sync_fetch_and_add(&thread_errors, 1);
	}
	return NULL;
}

/* Wait for @pid up to @secs; -1 when it did not end (it is killed). */
static int wait_for(pid_t pid, int secs)
{
	for (int i = 0; i < secs * 100; i++) {
		int st;

		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

int main(void)
{
	pthread_t t[THREADS];
	int refused = 0, hung = 0, got = 0, code = -1;
	void *warm = NULL;

	if (cudaMalloc(&warm, 1 << 20) != cudaSuccess) {
		fprintf(stderr, "fork_threads: no CUDA device\n");
		return 2;
	}
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < FORKS; i++) {
		pid_t pid;
		int r;

		usleep(20000);
		pid = fork();
		if (pid == 0) {
			void *p = NULL;
			cudaError_t e;

			alarm(CHILD_SECONDS);
			e = cudaMalloc(&p, 1 << 20);
			/* 200: success, a parent's pointer or new memory; else the code */
			_exit(e == cudaSuccess ? 200 : (int)e);
		}
		r = wait_for(pid, CHILD_SECONDS + 2);
		if (r < 0 || r == 128 + SIGALRM)
			hung++;
		else if (r == 200)
			got++;
		else {
			refused++;
			code = r;
		}
	}
	stop = 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	cudaFree(warm);
	printf("fork_threads: %d forks, children: %d refused (code %d), %d hung, %d got memory; "
	       "%d errors in the parent's threads\n",
	       FORKS, refused, code, hung, got, thread_errors);
	return refused == FORKS && !thread_errors ? 0 : 1;
}
