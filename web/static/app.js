// web/static/app.js: keeps the calls a page shows live.  The server sends,
// over server-sent events (/live), the calls whose state changed; this
// writes their new values as text (textContent, never markup), and reloads
// a call's own page so that its new attempts show.
'use strict';

document.addEventListener('DOMContentLoaded', () => {
	const box = document.querySelector('[data-live-calls]');
	if (!box || !window.EventSource)
		return;
	const ids = box.getAttribute('data-live-calls');
	if (!ids)
		return;
	const reload = box.hasAttribute('data-reload-on-change');
	const known = box.getAttribute('data-live-known') || '';
	const source = new EventSource('/live?calls=' + encodeURIComponent(ids) + '&known=' + encodeURIComponent(known));
	source.onmessage = (ev) => {
		let changed;
		try {
			changed = JSON.parse(ev.data);
		} catch (e) {
			return;
		}
		if (reload && changed.length) {
			source.close();
			window.location.reload();
			return;
		}
		for (const c of changed) {
			for (const el of document.querySelectorAll('[data-call="' + String(c.id).replace(/[^0-9]/g, '') + '"]')) {
				const field = el.getAttribute('data-field');
				if (!(field in c))
					continue;
				el.textContent = c[field] === null ? '' : String(c[field]);
				if (field === 'state')
					el.className = 'state ' + String(c.state).replace(/[^a-z]/g, '');
				el.classList.add('changed');
			}
		}
	};
});
