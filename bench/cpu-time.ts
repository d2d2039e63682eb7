// CPU time by process, read from /proc (Linux), to say where a benchmark's time went: its server, the
// load generator (this process), PostgreSQL (every `postgres` process) and the rest, with the machine's
// idle time. `cpuPerAnswer` turns two readings into microseconds of each per answer.
import { readdirSync, readFileSync } from 'node:fs';

type Kind = 'server' | 'client' | 'postgres' | 'other';

export interface CpuReading {
  /** Each process's CPU time so far (user + system, in ticks), by pid, with what it is. */
  processes: Map<number, { kind: Kind; ticks: number }>;
  /** All cores' time so far, and their idle time (with time waiting on the disk), in ticks. */
  total: number;
  idle: number;
}

export interface CpuPerAnswer {
  server: number;
  client: number;
  postgres: number;
  other: number;
  /**
   * The rest of the cores' busy time: the kernel's work counted to no process (interrupts, the
   * loopback network's softirqs) and the work of processes that ended between the readings (an
   * autovacuum worker, a pool's connection closed when idle), whose last ticks cannot be read.
   */
  unaccounted: number;
  idle: number;
}

// /proc counts in clock ticks of 10 ms (USER_HZ = 100 on Linux).
const TICK_US = 10_000;

/** The CPU time used so far, or undefined where /proc is not there. */
export function readCpu(serverPid: number): CpuReading | undefined {
  let stat: string;
  try {
    stat = readFileSync('/proc/stat', 'utf8');
  } catch {
    return undefined;
  }
  const cores = stat.split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  const processes = new Map<number, { kind: Kind; ticks: number }>();
  for (const name of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    const pid = Number(name);
    let line: string;
    try {
      line = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // ended meanwhile
    }
    const command = line.slice(line.indexOf('(') + 1, line.lastIndexOf(')'));
    const fields = line.slice(line.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime
    const kind: Kind =
      pid === serverPid
        ? 'server'
        : pid === process.pid
          ? 'client'
          : command.startsWith('postgres')
            ? 'postgres'
            : 'other';
    processes.set(pid, { kind, ticks });
  }
  return { processes, total: cores.reduce((sum, ticks) => sum + ticks, 0), idle: cores[3]! + cores[4]! };
}

/**
 * Microseconds of each per answer between two readings, process by process: a process that started
 * meanwhile counts whole, one that ended counts under `unaccounted`.
 */
export function cpuPerAnswer(before: CpuReading, after: CpuReading, answers: number): CpuPerAnswer {
  const used: Record<Kind, number> = { server: 0, client: 0, postgres: 0, other: 0 };
  for (const [pid, { kind, ticks }] of after.processes) used[kind] += ticks - (before.processes.get(pid)?.ticks ?? 0);
  const busy = after.total - before.total - (after.idle - before.idle);
  const per = (ticks: number) => (ticks * TICK_US) / answers;
  return {
    server: per(used.server),
    client: per(used.client),
    postgres: per(used.postgres),
    other: per(used.other),
    unaccounted: per(busy - used.server - used.client - used.postgres - used.other),
    idle: per(after.idle - before.idle),
  };
}

/** `server 150 µs, PostgreSQL 160, client 40, other 10, kernel/ended 20, idle 120` */
export function describeCpu(cpu: CpuPerAnswer): string {
  const us = (value: number) => value.toFixed(0);
  return `server ${us(cpu.server)} µs, PostgreSQL ${us(cpu.postgres)}, client ${us(cpu.client)}, other ${us(cpu.other)}, kernel/ended ${us(cpu.unaccounted)}, idle ${us(cpu.idle)}`;
}
