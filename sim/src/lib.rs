//! A software AQL packet processor and signal memory (work in progress).
