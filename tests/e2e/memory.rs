//! Where the memory went (issue 5): timeline, peak, growth, fragmentation and OOM forensics of
//! C clients on the simulated driver, and the HTML page rendered in headless Chromium.
