// Relative times as a timeline shows them: "now", "3 min", "2 h", "4 d",
// then the date ("Mar 4", with the year when it is not this one). The
// absolute time goes in the element's title.

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

export function relativeTime(iso: string, now: number = Date.now()): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const d = Math.max(0, now - t);
  if (d < 45_000) return 'now';
  if (d < HOUR) return `${Math.max(1, Math.round(d / MIN))} min`;
  if (d < DAY) return `${Math.floor(d / HOUR)} h`;
  if (d < 7 * DAY) return `${Math.floor(d / DAY)} d`;
  const date = new Date(t);
  const sameYear = date.getFullYear() === new Date(now).getFullYear();
  return date.toLocaleDateString('en-US', sameYear ? { month: 'short', day: 'numeric' } : { month: 'short', day: 'numeric', year: 'numeric' });
}

export function absoluteTime(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

// timeEl is a <time> that keeps itself current: refreshTimes rewrites
// every one of them.
export function timeEl(iso: string, testid = 'time'): HTMLTimeElement {
  const t = document.createElement('time');
  t.dateTime = iso;
  t.title = absoluteTime(iso);
  t.dataset.rel = '';
  t.dataset.testid = testid;
  t.textContent = relativeTime(iso);
  return t;
}

export function refreshTimes(): void {
  const now = Date.now();
  for (const t of document.querySelectorAll<HTMLTimeElement>('time[data-rel]')) t.textContent = relativeTime(t.dateTime, now);
}

export function startClock(): void {
  setInterval(refreshTimes, 30_000);
}

export function joined(iso: string): string {
  return `Joined ${new Date(iso).toLocaleDateString('en-US', { month: 'long', year: 'numeric' })}`;
}
