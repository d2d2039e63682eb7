import { useId, useMemo } from 'react';
import { DataTable, type Column } from '../../components/index.ts';
import { BOX_HEIGHT, BOX_WIDTH, layoutGraph } from './layout.ts';
import type { Automation, AutomationStep, StepCount } from './types.ts';
import { connectionWords, stepSummary, stepWords, type KnownNames } from './words.tsx';

// An automation's graph, read-only: each step a box (what it is, what it does, and how many runs
// entered it, wait in it, completed it and failed in it), each connection an arrow labelled with its
// type unless it is `default`. Under it the same steps as a table, for screen readers and small screens.

/** About how many characters of 12px text fit across a box. */
const LINE_CHARS = 30;

const clip = (text: string, chars: number) => (text.length > chars ? `${text.slice(0, chars - 1)}…` : text);

/** `text` in at most two lines of LINE_CHARS, broken between words where it can be; the rest clipped. */
function twoLines(text: string): string[] {
  if (text.length <= LINE_CHARS) return [text];
  const space = text.lastIndexOf(' ', LINE_CHARS);
  const cut = space > LINE_CHARS / 2 ? space : LINE_CHARS;
  return [text.slice(0, cut).trimEnd(), clip(text.slice(cut).trimStart(), LINE_CHARS)];
}

const NO_COUNTS: Omit<StepCount, 'key' | 'type'> = { entered: 0, waiting: 0, completed: 0, failed: 0, skipped: 0 };

function countsOf(counts: Map<string, StepCount>, key: string) {
  return counts.get(key) ?? NO_COUNTS;
}

function StepBox({
  step,
  x,
  y,
  reachable,
  counts,
  names,
}: {
  step: AutomationStep;
  x: number;
  y: number;
  reachable: boolean;
  counts: Omit<StepCount, 'key' | 'type'>;
  names: KnownNames;
}) {
  const summary = stepSummary(step.type, step.config, names);
  const words = stepWords(step.type);
  const half = BOX_WIDTH / 2;
  const figure = (label: string, value: number, column: 0 | 1, row: 0 | 1, tone: string) => (
    <text x={x + 10 + column * half} y={y + 84 + row * 20} className={`graph-count${value > 0 ? ` ${tone}` : ''}`}>
      {label} <tspan className="graph-count-value">{value}</tspan>
    </text>
  );
  return (
    <g
      role="group"
      aria-label={`${words} step ${step.key}`}
      data-step={step.key}
      className={`graph-step graph-step-${step.type}${reachable ? '' : ' graph-step-unreached'}`}
    >
      <title>
        {`${words} (${step.key})${summary ? `: ${summary}` : ''}${reachable ? '' : ' — not reached from the trigger'}` +
          (counts.skipped > 0 ? `. Skipped by ${counts.skipped} run${counts.skipped === 1 ? '' : 's'}.` : '')}
      </title>
      <rect x={x} y={y} width={BOX_WIDTH} height={BOX_HEIGHT} rx={6} className="graph-box" />
      <text x={x + 10} y={y + 20} className="graph-type">
        {words}
      </text>
      <text x={x + BOX_WIDTH - 10} y={y + 20} className="graph-key" textAnchor="end">
        {clip(step.key, Math.max(6, LINE_CHARS - words.length - 4))}
      </text>
      {twoLines(summary).map((line, index) => (
        <text key={index} x={x + 10} y={y + 38 + index * 16} className="graph-summary">
          {line}
        </text>
      ))}
      <line x1={x} x2={x + BOX_WIDTH} y1={y + 62} y2={y + 62} className="graph-divider" />
      {figure('Entered', counts.entered, 0, 0, 'graph-count-entered')}
      {figure('Waiting', counts.waiting, 1, 0, 'graph-count-waiting')}
      {figure('Completed', counts.completed, 0, 1, 'graph-count-completed')}
      {figure('Failed', counts.failed, 1, 1, 'graph-count-failed')}
    </g>
  );
}

export function AutomationGraph({
  automation,
  counts,
  names,
}: {
  automation: Automation;
  /** Per step key; a step missing here reads zero. */
  counts: StepCount[];
  names: KnownNames;
}) {
  const id = useId();
  const arrow = `${id}-arrow`;
  const layout = useMemo(
    () => layoutGraph(automation.steps, automation.connections, (step) => (step as AutomationStep).type === 'trigger'),
    [automation.steps, automation.connections],
  );
  const byKey = useMemo(() => new Map(counts.map((count) => [count.key, count])), [counts]);
  const steps = new Map(automation.steps.map((step) => [step.key, step]));

  const next = (key: string) =>
    automation.connections
      .filter((connection) => connection.from === key)
      .map((connection) => {
        const label = connectionWords(connection.type);
        return label ? `${connection.to} (${label})` : connection.to;
      })
      .join(', ');

  const columns: Array<Column<AutomationStep>> = [
    { header: 'Step', cell: (step) => <code className="break-anywhere">{step.key}</code> },
    { header: 'Type', className: 'nowrap', cell: (step) => stepWords(step.type) },
    {
      header: 'What it does',
      cell: (step) => <span className="break-anywhere">{stepSummary(step.type, step.config, names)}</span>,
    },
    { header: 'Then', cell: (step) => next(step.key) || <span className="muted">End</span> },
    { header: 'Entered', className: 'numeric', cell: (step) => countsOf(byKey, step.key).entered },
    { header: 'Waiting', className: 'numeric', cell: (step) => countsOf(byKey, step.key).waiting },
    { header: 'Completed', className: 'numeric', cell: (step) => countsOf(byKey, step.key).completed },
    { header: 'Failed', className: 'numeric', cell: (step) => countsOf(byKey, step.key).failed },
    { header: 'Skipped', className: 'numeric', cell: (step) => countsOf(byKey, step.key).skipped },
  ];

  return (
    <>
      <div className="graph-scroll" role="region" aria-label="The automation's graph" tabIndex={0}>
        <svg
          className="automation-graph"
          width={layout.width}
          height={layout.height}
          viewBox={`0 0 ${layout.width} ${layout.height}`}
          role="group"
          aria-label={`${automation.steps.length} steps, top to bottom from the trigger`}
        >
          <defs>
            <marker
              id={arrow}
              viewBox="0 0 10 10"
              refX="9"
              refY="5"
              markerWidth="7"
              markerHeight="7"
              orient="auto-start-reverse"
            >
              <path d="M 0 0 L 10 5 L 0 10 z" className="graph-arrowhead" />
            </marker>
          </defs>
          <g aria-hidden="true">
            {layout.connections.map((connection, index) => (
              <path
                key={`${connection.from}->${connection.to}:${index}`}
                d={connection.path}
                className={`graph-connection graph-connection-${connection.type}${connection.back ? ' graph-connection-back' : ''}`}
                markerEnd={`url(#${arrow})`}
              />
            ))}
          </g>
          {layout.steps.map((placed) => {
            const step = steps.get(placed.key)!;
            return (
              <StepBox
                key={placed.key}
                step={step}
                x={placed.x}
                y={placed.y}
                reachable={placed.reachable}
                counts={countsOf(byKey, placed.key)}
                names={names}
              />
            );
          })}
          <g aria-hidden="true">
            {layout.connections.map((connection, index) => {
              const label = connectionWords(connection.type);
              if (!label) return null;
              const width = label.length * 6.4 + 12;
              return (
                <g
                  key={`${connection.from}->${connection.to}:${index}`}
                  className={`graph-label graph-label-${connection.type}`}
                >
                  <rect
                    x={connection.labelX - width / 2}
                    y={connection.labelY - 9}
                    width={width}
                    height={18}
                    rx={9}
                    className="graph-label-back"
                  />
                  <text x={connection.labelX} y={connection.labelY + 4} textAnchor="middle">
                    {label}
                  </text>
                </g>
              );
            })}
          </g>
        </svg>
      </div>
      <details className="graph-table">
        <summary>The steps as a table</summary>
        <DataTable
          caption="Steps, with the runs that entered each"
          columns={columns}
          rows={automation.steps}
          rowKey={(step) => step.key}
        />
      </details>
    </>
  );
}
