// CPU time by process, read from /proc (Linux), to say where a benchmark's time went: its server, the
// load generator (this process), PostgreSQL (every `postgres` process) and the rest, with the machine's
// idle time. `cpuPerAnswer` turns two readings into microseconds of each per answer.
import { readdirSync, readFileSync } from 'node:fs';

export interface CpuReading {
  server: number;
  client: number;
  postgres: number;
  other: number;
  /** Idle time of all cores (and time waiting on the disk). */
  idle: number;
  /**
   * The rest of the cores' time: the kernel's work counted to no process (interrupts, the loopback
   * network's softirqs) and processes that ended between the readings (autovacuum workers).
   */
  unaccounted: number;
  /** All cores' time (internal: what `unaccounted` is worked out from). */
  total: number;
}

// /proc counts in clock ticks of 10 ms (USER_HZ = 100 on Linux).
const TICK_US = 10_000;

/** The CPU time used so far, in ticks, or undefined where /proc is not there. */
export function readCpu(serverPid: number): CpuReading | undefined {
  let stat: string;
  try {
    stat = readFileSync('/proc/stat', 'utf8');
  } catch {
    return undefined;
  }
  const cores = stat.split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  const total = cores.reduce((sum, ticks) => sum + ticks, 0);
  const reading: CpuReading = {
    server: 0,
    client: 0,
    postgres: 0,
    other: 0,
    idle: cores[3]! + cores[4]!,
    unaccounted: 0,
    total,
  };
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let line: string;
    try {
      line = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // ended meanwhile
    }
    const name = line.slice(line.indexOf('(') + 1, line.lastIndexOf(')'));
    const fields = line.slice(line.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime
    if (Number(pid) === serverPid) reading.server += ticks;
    else if (Number(pid) === process.pid) reading.client += ticks;
    else if (name.startsWith('postgres')) reading.postgres += ticks;
    else reading.other += ticks;
  }
  reading.unaccounted = total - reading.idle - reading.server - reading.client - reading.postgres - reading.other;
  return reading;
}

/** Microseconds of each per answer between two readings (processes that started meanwhile count whole). */
export function cpuPerAnswer(before: CpuReading, after: CpuReading, answers: number): CpuReading {
  const per = (key: keyof CpuReading) => Math.max(0, ((after[key] - before[key]) * TICK_US) / answers);
  return {
    server: per('server'),
    client: per('client'),
    postgres: per('postgres'),
    other: per('other'),
    idle: per('idle'),
    unaccounted: per('unaccounted'),
    total: per('total'),
  };
}

/** `server 150 µs, PostgreSQL 160, client 40, other 10, kernel/ended 20, idle 120` */
export function describeCpu(cpu: CpuReading): string {
  const us = (value: number) => value.toFixed(0);
  return `server ${us(cpu.server)} µs, PostgreSQL ${us(cpu.postgres)}, client ${us(cpu.client)}, other ${us(cpu.other)}, kernel/ended ${us(cpu.unaccounted)}, idle ${us(cpu.idle)}`;
}
