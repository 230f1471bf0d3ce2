// web/lib/html.js: HTML made safely.  Every text of the database is a
// hostile role's (args, results, error texts, keys, event and function
// names): it reaches a page only through esc(), inside an element or a
// double-quoted attribute, never into a script, a style or a URL's scheme.
// A template tag, h``, escapes every value it is given unless the value was
// made by h`` itself (a Safe), so forgetting esc() cannot inject markup.

'use strict';

class Safe {
	constructor(s) { this.s = s; }
	toString() { return this.s; }
}

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

function esc(v) {
	if (v === null || v === undefined)
		return '';
	return String(v).replace(/[&<>"'`]/g, (c) => ESCAPES[c]);
}

function piece(v) {
	if (v instanceof Safe)
		return v.s;
	if (Array.isArray(v))
		return v.map(piece).join('');
	return esc(v);
}

// h`<p>${text}</p>`: the values escaped, the literal parts kept
function h(strings, ...values) {
	let out = strings[0];
	for (let i = 0; i < values.length; i++)
		out += piece(values[i]) + strings[i + 1];
	return new Safe(out);
}

// a query string of the given pairs, each part percent-encoded
function qs(params) {
	const parts = [];
	for (const [k, v] of Object.entries(params))
		if (v !== undefined && v !== null && v !== '')
			parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(v));
	return parts.length ? '?' + parts.join('&') : '';
}

module.exports = { Safe, esc, h, qs };
