// Numbers as the browser's locale writes them ("12,345" or "12 345" or "12.345").
const numberFormat = new Intl.NumberFormat();

export function formatNumber(value: number): string {
  return numberFormat.format(value);
}
