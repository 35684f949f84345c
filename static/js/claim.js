// Claim pages: the live IBAN check and the auto-refresh of pages waiting for something to happen.
// Everything also works without JavaScript (the server checks the IBAN again on submit; waiting
// pages carry a "check again" button).
(function () {
  "use strict";
  var input = document.getElementById("id_iban");
  var out = document.getElementById("iban-status");
  if (input && out && input.dataset.checkUrl) {
    var timer = null;
    var check = function () {
      var value = input.value.trim();
      if (value.length < 5) { out.textContent = ""; out.className = "iban-status"; return; }
      var url = input.dataset.checkUrl + (input.dataset.checkUrl.indexOf("?") < 0 ? "?" : "&") + "iban=" + encodeURIComponent(value);
      fetch(url, { headers: { "Accept": "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          if (data.valid) {
            var details = [data.bank_name, data.bic].filter(Boolean).join(" · ");
            out.textContent = "✓ " + data.formatted + (details ? " — " + details : "");
            out.className = "iban-status ok";
            input.setAttribute("aria-invalid", "false");
          } else {
            out.textContent = data.message;
            out.className = "iban-status bad";
            input.setAttribute("aria-invalid", "true");
          }
        })
        .catch(function () { out.textContent = ""; });
    };
    input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(check, 400); });
    input.addEventListener("blur", check);
  }
  // Where a country has several kinds of bank account, only the chosen kind's fields show (all of
  // them without JavaScript; the server reads only the chosen kind's).
  var kinds = document.querySelector('[data-testid="account-type"]');
  if (kinds) {
    var groups = document.querySelectorAll(".account-fields[data-account-type]");
    var show = function () {
      var chosen = kinds.querySelector("input:checked");
      groups.forEach(function (group) {
        group.hidden = !!chosen && group.dataset.accountType !== chosen.value;
      });
    };
    kinds.addEventListener("change", show);
    show();
  }
  // A waiting page polls a small JSON endpoint and reloads once the state changed.
  var poll = document.querySelector("[data-poll-url]");
  if (poll) {
    var url = poll.dataset.pollUrl, state = poll.dataset.pollState;
    var tick = function () {
      fetch(url, { headers: { "Accept": "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (data) {
          if (data.state !== state) { window.location.reload(); } else { setTimeout(tick, 2000); }
        })
        .catch(function () { setTimeout(tick, 5000); });
    };
    setTimeout(tick, 2000);
  }
})();
